/*
 * cupti_trace.cpp — a kernel trace for GPU hosts without nsys. Built as a shared library that the CUDA driver loads
 * into any CUDA process named by CUDA_INJECTION64_PATH (InitializeInjection below); it records every kernel's GPU
 * start and end through CUPTI's concurrent-kernel activity (graph-launched kernels included, without serialising
 * them) and writes, at process exit, one CSV row per kernel in the columns bench/gpu/timeline.py reads from nsys's
 * cuda_gpu_trace report: "Start (ns),Duration (ns),Strm,Name" (names demangled, quoted), and a column "Grid" (grid x*y*z, so that one
 * cuBLASLt kernel at two shapes can be told apart). Memory copies and sets (a graph's memcpy and memset nodes too,
 * and any a library queues) are rows of their own, named "memcpy <kind> <bytes> B" and "memset <bytes> B" with an
 * empty grid, so that a stretch with no kernel but a copy in flight is not read as idle.
 *
 *   CUDA_INJECTION64_PATH=libfh_cupti_trace.so FH_TRACE_OUT=trace.csv <any CUDA program>
 *
 * bench/gpu/trace.sh builds it and traces the reference bench. A measurement tool only: nothing of the product
 * loads it.
 */
#include <cupti.h>
#include <cxxabi.h>
#include <stdio.h>
#include <stdlib.h>

#include <mutex>

namespace {

FILE* g_out = nullptr;
std::mutex g_mu;
size_t g_kernels = 0, g_memops = 0, g_dropped = 0;
constexpr size_t kBufBytes = 16u << 20;

void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
  *buf = static_cast<uint8_t*>(aligned_alloc(8, kBufBytes));
  *size = *buf ? kBufBytes : 0;
  *max_records = 0;
}

void write_name(const char* name) {
  int st = 0;
  char* dm = name ? abi::__cxa_demangle(name, nullptr, nullptr, &st) : nullptr;
  const char* n = st == 0 && dm ? dm : (name ? name : "?");
  fputc('"', g_out);
  for (const char* c = n; *c; ++c) {
    if (*c == '"') fputc('"', g_out);
    fputc(*c, g_out);
  }
  fputc('"', g_out);
  free(dm);
}

const char* copy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buf, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* r = nullptr;
  while (g_out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      fprintf(g_out, "%llu,%llu,%u,,\"memcpy %s %llu B\"\n", (unsigned long long)m->start,
              (unsigned long long)(m->end - m->start), m->streamId, copy_kind(m->copyKind), (unsigned long long)m->bytes);
      ++g_memops;
      continue;
    }
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      fprintf(g_out, "%llu,%llu,%u,,\"memset %llu B\"\n", (unsigned long long)m->start,
              (unsigned long long)(m->end - m->start), m->streamId, (unsigned long long)m->bytes);
      ++g_memops;
      continue;
    }
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
    fprintf(g_out, "%llu,%llu,%u,%dx%dx%d,", (unsigned long long)k->start, (unsigned long long)(k->end - k->start),
            k->streamId, k->gridX, k->gridY, k->gridZ);
    write_name(k->name);
    fputc('\n', g_out);
    ++g_kernels;
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  free(buf);
}

void at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_out) return;
  fclose(g_out);
  g_out = nullptr;
  fprintf(stderr, "cupti_trace: %zu kernels and %zu memory copies/sets written, %zu records dropped\n", g_kernels,
          g_memops, g_dropped);
}

bool ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  fprintf(stderr, "cupti_trace: %s: %s\n", what, msg ? msg : "unknown CUPTI error");
  return false;
}

}  // namespace

/* Called by the CUDA driver at initialisation when CUDA_INJECTION64_PATH names this library; 1 = loaded. */
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* path = getenv("FH_TRACE_OUT");
  if (!path || !*path) path = "cupti_trace.csv";
  g_out = fopen(path, "w");
  if (!g_out) {
    fprintf(stderr, "cupti_trace: cannot write %s (FH_TRACE_OUT)\n", path);
    return 0;
  }
  fprintf(g_out, "Start (ns),Duration (ns),Strm,Grid,Name\n");
  if (!ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks") ||
      !ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)") ||
      !ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)") ||
      !ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)")) {
    fclose(g_out);
    g_out = nullptr;
    return 0;
  }
  atexit(at_exit);
  return 1;
}
