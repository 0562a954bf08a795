// Load generator for the HTTP server (loopback only, bounded): an in-process server over a fast
// scripted model; N concurrent streaming Chat Completions clients (asio coroutines) in a
// separate client process forked at start-up, so that client buffers and client CPU are not
// the server's; TTFT / TPOT p50 / p99, requests/s and errors at 1, 64, 512 and 1,000 streams;
// the same load on the engine directly (server overhead); the server process's CPU time per
// streamed token; and the server's memory per open stream. Prints a Markdown table.
// Usage: bench_server_load_bench [max_tokens (16)] [levels, e.g. 1,64,512,1000] [io_threads (1)]
//        [client_threads (1)] [handler_threads (0)]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../tests/server/service_harness.h"
#include "server/http_server.h"

// GCC 12 reports asio's coroutine-frame operator delete as mismatched once one_stream is
// inlined into its callers (a known false positive); nothing here allocates frames by hand.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using deepinfer::server::testing::HarnessOptions;
using deepinfer::server::testing::ServiceHarness;
constexpr auto kNoThrow = asio::experimental::as_tuple(asio::use_awaitable);

struct StreamResult {
  bool ok = false;
  double ttft = 0;  // s, request sent → first SSE frame
  double tpot = 0;  // s, mean gap between frames after the first
  double e2e = 0;
  int frames = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::string chat_request(int max_tokens) {
  const std::string body =
      R"({"model":"deepseek-v4-test","stream":true,"ignore_eos":true,"max_tokens":)" +
      std::to_string(max_tokens) + R"(,"messages":[{"role":"user","content":"Hi"}]})";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
         "application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// One streaming exchange: counts "data: " frames as they arrive, until [DONE]. Reads land after
// the previous read's last bytes (a marker may straddle reads), so nothing is copied per read.
asio::awaitable<void> one_stream(tcp::endpoint ep, const std::string& request, StreamResult& out,
                                 std::atomic<int>* started) {
  tcp::socket s(co_await asio::this_coro::executor);
  const auto t0 = Clock::now();
  auto [ec] = co_await s.async_connect(ep, kNoThrow);
  if (ec) co_return;
  auto [wec, wn] = co_await asio::async_write(s, asio::buffer(request), kNoThrow);
  (void)wn;
  if (wec) co_return;
  constexpr size_t kKeep = 11;  // bytes kept between reads: "data: [DONE]" minus one
  char buf[4096];
  size_t kept = 0;
  Clock::time_point first{}, last{};
  bool status_checked = false, done = false;
  for (;;) {
    auto [rec, n] =
        co_await s.async_read_some(asio::buffer(buf + kept, sizeof buf - kept), kNoThrow);
    if (rec) break;
    const auto now = Clock::now();
    const std::string_view text(buf, kept + n);
    if (!status_checked) {
      if (text.size() < 12) {
        kept = text.size();
        continue;
      }
      status_checked = true;
      if (text.substr(0, 12) != "HTTP/1.1 200") break;
    }
    // A marker wholly inside the kept bytes was counted by the previous read.
    size_t pos = 0, frames = 0;
    while ((pos = text.find("data: ", pos)) != std::string_view::npos) {
      if (pos + 6 > kept) ++frames;
      if (text.substr(pos, 12) == "data: [DONE]") done = true;
      pos += 6;
    }
    if (frames > 0) {
      if (out.frames == 0) {
        first = now;
        if (started) ++*started;
      }
      last = now;
      out.frames += static_cast<int>(frames);
    }
    if (done) break;
    kept = std::min(kKeep, text.size());
    std::memmove(buf, text.data() + text.size() - kept, kept);
  }
  out.ok = done;
  if (out.frames > 0) {
    out.ttft = std::chrono::duration<double>(first - t0).count();
    out.e2e = std::chrono::duration<double>(last - t0).count();
    if (out.frames > 2)
      out.tpot =
          std::chrono::duration<double>(last - first).count() / (out.frames - 2);  // - [DONE]
  }
}

// n streams over `threads` client threads, each with its own event loop (streams round-robin),
// so that the load generator is not what limits 1,000 streams on a many-core host.
std::vector<StreamResult> run_clients(uint16_t port, int n, int max_tokens, int threads,
                                      std::atomic<int>* started = nullptr) {
  const std::string request = chat_request(max_tokens);
  std::vector<StreamResult> results(static_cast<size_t>(n));
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  std::vector<asio::io_context> loops(static_cast<size_t>(std::max(1, threads)));
  for (size_t i = 0; i < results.size(); ++i)
    asio::co_spawn(loops[i % loops.size()], one_stream(ep, request, results[i], started),
                   asio::detached);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < loops.size(); ++i) pool.emplace_back([&loops, i] { loops[i].run(); });
  loops[0].run();
  for (auto& t : pool) t.join();
  return results;
}

struct Row {
  int concurrency;
  std::string path;
  double ttft50, ttft99, tpot50, tpot99, rps;
  int errors;
};

Row summarize(int n, const std::string& path, const std::vector<StreamResult>& results,
              double wall) {
  std::vector<double> ttft, tpot;
  int errors = 0;
  for (const auto& r : results) {
    if (!r.ok) {
      ++errors;
      continue;
    }
    ttft.push_back(r.ttft);
    tpot.push_back(r.tpot);
  }
  return Row{n,
             path,
             percentile(ttft, 0.5) * 1e3,
             percentile(ttft, 0.99) * 1e3,
             percentile(tpot, 0.5) * 1e3,
             percentile(tpot, 0.99) * 1e3,
             static_cast<double>(results.size() - static_cast<size_t>(errors)) / wall,
             errors};
}

// The same requests submitted to the engine directly (no HTTP, recipe or detokenizer).
std::vector<StreamResult> run_engine_direct(ServiceHarness& h, int n, int max_tokens,
                                            int64_t prompt_tokens) {
  struct State {
    Clock::time_point t0, first, last;
    int tokens = 0;
    bool done = false;
  };
  std::vector<State> states(static_cast<size_t>(n));
  std::atomic<int> finished{0};
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + i % 400);
  for (int i = 0; i < n; ++i) {
    deepinfer::engine::EngineRequest req;
    req.prompt = prompt;
    req.params.max_tokens = max_tokens;
    req.params.ignore_eos = true;
    State* st = &states[static_cast<size_t>(i)];
    st->t0 = Clock::now();
    auto r = h.engine().submit(std::move(req),
                               [st, &finished](const deepinfer::engine::RequestEvent& ev) {
                                 const auto now = Clock::now();
                                 if (ev.has_token) {
                                   if (st->tokens++ == 0) st->first = now;
                                   st->last = now;
                                 }
                                 if (ev.finish != deepinfer::engine::FinishReason::kNone) {
                                   st->done = true;
                                   ++finished;
                                 }
                               });
    if (!r.ok()) ++finished;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (finished < n && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<StreamResult> out(static_cast<size_t>(n));
  for (size_t i = 0; i < states.size(); ++i) {
    const State& st = states[i];
    out[i].ok = st.done && st.tokens > 0;
    out[i].frames = st.tokens;
    if (st.tokens > 0) {
      out[i].ttft = std::chrono::duration<double>(st.first - st.t0).count();
      if (st.tokens > 1)
        out[i].tpot = std::chrono::duration<double>(st.last - st.first).count() / (st.tokens - 1);
    }
  }
  return out;
}

HarnessOptions bench_options() {
  HarnessOptions o;
  o.max_concurrent = 4096;
  o.max_model_len = 1024;
  o.max_num_seqs = 1024;
  o.num_state_slots = 1100;
  o.num_blocks = 16384;
  // A copy of the tree elsewhere (e.g. a bench machine) names its own models/default.
  if (const char* dir = std::getenv("DEEPINFER_SOURCE_DIR")) o.source_dir = dir;
  return o;
}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The client process: forked before any thread exists; runs one load per command read from
// `in` and writes the per-stream results to `out`. hold = 1: reports (one byte) once every
// stream has its first frame, then runs on until the server ends the streams.
struct ClientCommand {
  uint16_t port = 0;  // 0: exit
  int n = 0;
  int max_tokens = 0;
  int hold = 0;
  int threads = 1;
};

bool read_all(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t r = read(fd, p, size);
    if (r <= 0) return false;
    p += r;
    size -= static_cast<size_t>(r);
  }
  return true;
}
bool write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t r = write(fd, p, size);
    if (r <= 0) return false;
    p += r;
    size -= static_cast<size_t>(r);
  }
  return true;
}

[[noreturn]] void client_process(int in, int out) {
  ClientCommand cmd;
  while (read_all(in, &cmd, sizeof cmd) && cmd.port != 0) {
    std::vector<StreamResult> results;
    if (cmd.hold) {
      std::atomic<int> started{0};
      std::thread signaller([&] {
        while (started < cmd.n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const char c = 1;
        if (!write_all(out, &c, 1)) _exit(1);
      });
      results = run_clients(cmd.port, cmd.n, cmd.max_tokens, cmd.threads, &started);
      signaller.join();
    } else {
      results = run_clients(cmd.port, cmd.n, cmd.max_tokens, cmd.threads);
    }
    if (!write_all(out, results.data(), results.size() * sizeof(StreamResult))) _exit(1);
  }
  _exit(0);
}

struct ClientProcess {
  pid_t pid = -1;
  int to_child = -1, from_child = -1;

  bool start() {
    int a[2], b[2];
    if (pipe(a) != 0 || pipe(b) != 0) return false;
    pid = fork();
    if (pid == 0) {
      close(a[1]);
      close(b[0]);
      client_process(a[0], b[1]);
    }
    close(a[0]);
    close(b[1]);
    to_child = a[1];
    from_child = b[0];
    return pid > 0;
  }
  bool send(const ClientCommand& cmd) { return write_all(to_child, &cmd, sizeof cmd); }
  bool wait_started() {
    char c = 0;
    return read_all(from_child, &c, 1);
  }
  std::vector<StreamResult> results(int n) {
    std::vector<StreamResult> out(static_cast<size_t>(n));
    if (!read_all(from_child, out.data(), out.size() * sizeof(StreamResult))) out.clear();
    return out;
  }
  void stop() {
    ClientCommand quit;
    send(quit);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

int g_handler_threads = 0;

deepinfer::server::HttpServerOptions server_options(int io_threads) {
  deepinfer::server::HttpServerOptions ho;
  ho.port = 0;
  ho.io_threads = io_threads;
  ho.handler_threads = g_handler_threads;
  return ho;
}

// The server's own delay per streamed token, as the transport reports it (engine event → bytes
// taken by the socket, with its parts): preallocated slots filled from the I/O threads without
// a lock; each thread claims a run of slots at a time, so that the threads' reports, which come
// in the same burst every engine step, do not all bump one shared counter.
struct TokenDelays {
  static constexpr size_t kRun = 64;
  std::vector<deepinfer::server::TokenDelay> slots;
  std::atomic<size_t> used{0};
  const uint64_t id = next_id()++;  // a claim is this instance's, not one's at the same address
  explicit TokenDelays(size_t capacity) : slots(capacity + 64 * kRun) {}
  static std::atomic<uint64_t>& next_id() {
    static std::atomic<uint64_t> n{1};
    return n;
  }
  void add(const deepinfer::server::TokenDelay& d) {
    struct Claim {
      uint64_t owner = 0;
      size_t next = 0, end = 0;
    };
    thread_local Claim claim;
    if (claim.owner != id || claim.next == claim.end) {
      claim.owner = id;
      claim.next = used.fetch_add(kRun);
      claim.end = claim.next + kRun;
    }
    const size_t i = claim.next++;
    if (i < slots.size()) slots[i] = d;
  }
  // Writes of one phase (0 = the stream's first token, 1 = later ones, 2 = all); unfilled slots
  // of the claimed runs have no tokens.
  std::vector<deepinfer::server::TokenDelay> phase(int which) const {
    std::vector<deepinfer::server::TokenDelay> v;
    for (size_t i = 0; i < std::min(used.load(), slots.size()); ++i)
      if (slots[i].tokens > 0 && (which == 2 || slots[i].first == (which == 0)))
        v.push_back(slots[i]);
    return v;
  }
};

using deepinfer::server::TokenDelay;
using DelayPart = double (*)(const TokenDelay&);
constexpr DelayPart kTotal = [](const TokenDelay& d) { return d.total; };
constexpr DelayPart kServer = [](const TokenDelay& d) { return d.server(); };
constexpr int kNumParts = 5;
constexpr DelayPart kParts[kNumParts] = {
    [](const TokenDelay& d) { return d.hold; }, [](const TokenDelay& d) { return d.handoff; },
    [](const TokenDelay& d) { return d.queue; }, [](const TokenDelay& d) { return d.process; },
    [](const TokenDelay& d) { return d.send; }};

// Token-weighted percentile (ms) of one part of the writes' delays.
double weighted_ms(std::vector<TokenDelay> v, double p, DelayPart part) {
  std::sort(v.begin(), v.end(), [part](const auto& a, const auto& b) { return part(a) < part(b); });
  int64_t total = 0;
  for (const auto& e : v) total += e.tokens;
  int64_t seen = 0;
  for (const auto& e : v)
    if ((seen += e.tokens) > static_cast<int64_t>(p * static_cast<double>(total)))
      return part(e) * 1e3;
  return v.empty() ? 0 : part(v.back()) * 1e3;
}

// One row of the delay table: one level and phase.
struct DelayRow {
  int streams = 0;
  const char* phase = "";
  int64_t tokens = 0;
  double total50 = 0, total99 = 0, server50 = 0, server99 = 0;
  double part_p99[kNumParts] = {};   // hold, handoff, queue, process, send
  double tail_mean[kNumParts] = {};  // the same, mean over the server's slowest 1 %
};

DelayRow delay_row(int streams, const char* phase, std::vector<TokenDelay> v) {
  DelayRow r;
  r.streams = streams;
  r.phase = phase;
  for (const auto& e : v) r.tokens += e.tokens;
  r.total50 = weighted_ms(v, 0.5, kTotal);
  r.total99 = weighted_ms(v, 0.99, kTotal);
  r.server50 = weighted_ms(v, 0.5, kServer);
  r.server99 = weighted_ms(v, 0.99, kServer);
  for (int k = 0; k < kNumParts; ++k) r.part_p99[k] = weighted_ms(v, 0.99, kParts[k]);
  // Where the slowest 1 % of tokens (by the server's own delay) spent it.
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.server() > b.server(); });
  const int64_t tail = std::max<int64_t>(1, r.tokens / 100);
  int64_t taken = 0;
  for (const auto& e : v) {
    if (taken >= tail) break;
    const int64_t w = std::min<int64_t>(e.tokens, tail - taken);
    for (int k = 0; k < kNumParts; ++k)
      r.tail_mean[k] += kParts[k](e) * 1e3 * static_cast<double>(w);
    taken += w;
  }
  for (double& m : r.tail_mean) m /= static_cast<double>(std::max<int64_t>(1, taken));
  return r;
}

// Server RSS growth per open stream: the client process holds `n` slow streams open.
double memory_per_stream_kb(ClientProcess& client, int n, int io_threads) {
  HarnessOptions o = bench_options();
  o.step_delay = std::chrono::milliseconds(20);
  ServiceHarness h(o);
  deepinfer::server::HttpServer server(
      server_options(io_threads),
      [&h](deepinfer::server::HttpRequest q, deepinfer::server::ResponderPtr r) {
        h.router().handle(std::move(q), std::move(r));
      });
  if (!server.start().ok()) return -1;
  const long before = rss_kb();
  if (!client.send(ClientCommand{server.port(), n, 400, 1}) || !client.wait_started()) return -1;
  const long during = rss_kb();
  h.api().abort_all();
  client.results(n);
  server.stop(1000);
  server.wait();
  return static_cast<double>(during - before) / n;
}

}  // namespace

int main(int argc, char** argv) {
  const int max_tokens = argc > 1 ? std::atoi(argv[1]) : 16;
  std::vector<int> levels = {1, 64, 512, 1000};
  if (argc > 2) {
    levels.clear();
    std::stringstream ss(argv[2]);
    std::string item;
    while (std::getline(ss, item, ',')) levels.push_back(std::stoi(item));
  }
  const int io_threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const int client_threads = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  g_handler_threads = argc > 5 ? std::max(0, std::atoi(argv[5])) : 0;
  // The client process first: the fork must happen before any thread exists.
  ClientProcess client;
  if (!client.start()) {
    std::fprintf(stderr, "cannot fork the client process\n");
    return 1;
  }
  const double kb_per_stream = memory_per_stream_kb(client, 1000, io_threads);

  std::vector<Row> rows;
  std::vector<std::pair<int, std::pair<double, double>>> cpu;  // streams → (HTTP, engine) µs/token
  std::vector<DelayRow> delay;
  for (int n : levels) {
    ServiceHarness h(bench_options());
    if (!h.ok()) {
      std::fprintf(stderr, "harness: %s\n", h.error().c_str());
      return 1;
    }
    TokenDelays delays(static_cast<size_t>(n) * (max_tokens + 2));
    auto options = server_options(io_threads);
    options.on_token_delay = [&delays](const TokenDelay& d) { delays.add(d); };
    deepinfer::server::HttpServer server(
        options, [&h](deepinfer::server::HttpRequest q, deepinfer::server::ResponderPtr r) {
          h.router().handle(std::move(q), std::move(r));
        });
    if (!server.start().ok()) return 1;
    const double tokens = static_cast<double>(n) * max_tokens;
    auto t0 = Clock::now();
    double cpu0 = process_cpu_seconds();
    client.send(ClientCommand{server.port(), n, max_tokens, 0, client_threads});
    auto results = client.results(n);
    const double http_cpu = (process_cpu_seconds() - cpu0) / tokens * 1e6;
    rows.push_back(
        summarize(n, "HTTP", results, std::chrono::duration<double>(Clock::now() - t0).count()));
    server.stop(1000);
    server.wait();
    t0 = Clock::now();
    cpu0 = process_cpu_seconds();
    auto direct = run_engine_direct(h, n, max_tokens, 64);
    const double engine_cpu = (process_cpu_seconds() - cpu0) / tokens * 1e6;
    rows.push_back(
        summarize(n, "engine", direct, std::chrono::duration<double>(Clock::now() - t0).count()));
    cpu.push_back({n, {http_cpu, engine_cpu}});
    delay.push_back(delay_row(n, "all", delays.phase(2)));
    delay.push_back(delay_row(n, "first", delays.phase(0)));
    delay.push_back(delay_row(n, "later", delays.phase(1)));
  }
  client.stop();
  std::printf(
      "max_tokens %d per stream, prompt 64 tokens, %d server I/O thread(s), %d handler "
      "thread(s), %d client thread(s)\n\n",
      max_tokens, io_threads, g_handler_threads, client_threads);
  std::printf(
      "| streams | path | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | req/s | errors "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows)
    std::printf("| %d | %s | %.2f | %.2f | %.3f | %.3f | %.1f | %d |\n", r.concurrency,
                r.path.c_str(), r.ttft50, r.ttft99, r.tpot50, r.tpot99, r.rps, r.errors);
  std::printf("\n| streams | server process CPU µs per token, HTTP | engine only | added |\n");
  std::printf("|---|---|---|---|\n");
  for (const auto& [n, c] : cpu)
    std::printf("| %d | %.2f | %.2f | %.2f |\n", n, c.first, c.second, c.first - c.second);
  // The engine's hand-over of the step's events → bytes taken by the socket ("total"); the
  // server's own part of it ("server") leaves out a held-back token's wait for the engine's
  // next token ("hold").
  std::printf(
      "\n| streams | phase, tokens | total delay p50 / p99 ms | server delay p50 / p99 ms | p99 of "
      "hold / handoff / queue / process / send ms | server's slowest 1 %%: mean hold / handoff / "
      "queue / process / send ms |\n|---|---|---|---|---|---|\n");
  for (const auto& d : delay)
    std::printf(
        "| %d | %s %lld | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f / %.3f / %.3f / %.3f | %.3f / "
        "%.3f / %.3f / %.3f / %.3f |\n",
        d.streams, d.phase, static_cast<long long>(d.tokens), d.total50, d.total99, d.server50,
        d.server99, d.part_p99[0], d.part_p99[1], d.part_p99[2], d.part_p99[3], d.part_p99[4],
        d.tail_mean[0], d.tail_mean[1], d.tail_mean[2], d.tail_mean[3], d.tail_mean[4]);
  std::printf("\nserver RSS per open stream (1000 streams): %.1f KB\n", kb_per_stream);
  return 0;
}
