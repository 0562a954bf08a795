// A kernel timeline for machines without Nsight Systems: a CUPTI injection library. Loaded by the
// CUDA driver through CUDA_INJECTION64_PATH, it records every kernel's start and end (also the
// kernels of CUDA graph replays, with their graph node) and writes them as CSV when the process
// exits, to $DEEPINFER_KERNEL_TRACE (default kernel_trace.csv). tools/bench/kernel_trace.sh runs
// a decode bench under it and tools/bench/kernel_trace_summary.py reads the CSV.
#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  uint64_t start, end, graph_node;
  uint32_t graph_id, correlation, stream, grid, block;
  std::string name;
};

std::mutex g_mutex;
std::vector<KernelRecord> g_records;
bool g_written = false;
constexpr size_t kBufferBytes = 8u << 20;

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "kernel_trace: %s: %s\n", what, text ? text : "unknown error");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

std::string demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    g_records.push_back({k->start, k->end, k->graphNodeId, k->graphId, k->correlationId,
                         k->streamId, static_cast<uint32_t>(k->gridX * k->gridY * k->gridZ),
                         static_cast<uint32_t>(k->blockX * k->blockY * k->blockZ),
                         demangled(k->name)});
  }
  std::free(buffer);
}

void write_records() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_written) return;
  g_written = true;
  const char* path = std::getenv("DEEPINFER_KERNEL_TRACE");
  if (!path || !*path) path = "kernel_trace.csv";
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "start_ns,end_ns,graph_id,graph_node,correlation,stream,grid,block,name\n");
  for (const KernelRecord& r : g_records) {
    std::string name = r.name;  // CSV: the name quoted, its quotes doubled
    for (size_t i = name.find('"'); i != std::string::npos; i = name.find('"', i + 2))
      name.insert(i, 1, '"');
    std::fprintf(f, "%llu,%llu,%u,%llu,%u,%u,%u,%u,\"%s\"\n",
                 static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end),
                 r.graph_id, static_cast<unsigned long long>(r.graph_node), r.correlation, r.stream,
                 r.grid, r.block, name.c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels -> %s\n", g_records.size(), path);
}

// Records still buffered for a context are flushed before the context goes away.
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void*) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

}  // namespace

extern "C" int InitializeInjection() {
  CUpti_SubscriberHandle subscriber{};
  report(cuptiSubscribe(&subscriber, on_callback, nullptr), "subscribe");
  report(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                             CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
         "context callback");
  report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "buffers");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "kernel activity");
  std::atexit(write_records);
  return 1;
}
