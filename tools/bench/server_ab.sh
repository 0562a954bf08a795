#!/usr/bin/env bash
# Side-by-side server load runs on one machine: two builds of bench_server_load_bench (A = the
# baseline, B = the change), alternating A/B per round so that drift hits both alike.
#   tools/bench/server_ab.sh OUT BENCH_A BENCH_B ROUNDS STREAMS "IO_THREADS..." [MAX_TOKENS]
# Writes OUT/<round>_<A|B>_io<N>.md (each run's tables) and prints the server-delay rows.
set -uo pipefail
out=$1 a=$2 b=$3 rounds=$4 streams=$5 ios=$6 tokens=${7:-16}
mkdir -p "$out"
for ((r = 1; r <= rounds; r++)); do
  for io in $ios; do
    for side in A B; do
      bin=$a
      [[ $side == B ]] && bin=$b
      log="$out/${r}_${side}_io${io}.md"
      timeout 120 "$bin" "$tokens" "$streams" "$io" 4 4 > "$log" 2>&1
      echo "round $r $side io=$io: $(grep -E "^\| $streams \| all" "$log" | head -1)"
    done
  done
done
