// KernelTrace on CUPTI's activity API (see kernel_trace.h).
#include "kernel_trace.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <stdexcept>

namespace trainer::bench {

namespace {

std::atomic<KernelTrace*> g_trace{nullptr};  // the one recording; CUPTI's callbacks are plain functions
constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  throw std::runtime_error(std::string(call) + " failed: " + (text ? text : "unknown CUPTI error"));
}

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && plain ? plain : name;
  std::free(plain);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* a = nullptr;
  KernelTrace* const trace = g_trace.load();
  while (trace && cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
    if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      trace->add({demangle(k->name), k->start, k->end});
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      trace->add({"[copy kind " + std::to_string(int(m->copyKind)) + "]", m->start, m->end});
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
      trace->add({"[memset]", m->start, m->end});
    }
  }
  size_t dropped = 0;
  if (trace && cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0)
    trace->add_dropped(dropped);
  std::free(buffer);
}

}  // namespace

KernelTrace::KernelTrace() {
  if (g_trace) throw std::runtime_error("KernelTrace: another trace is recording");
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  g_trace = this;
  running_ = true;
  try {
    for (CUpti_ActivityKind k : kKinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
  } catch (...) {
    stop();
    throw;
  }
}

KernelTrace::~KernelTrace() { stop(); }

void KernelTrace::stop() {
  if (!running_) return;
  cuptiActivityFlushAll(1);
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  running_ = false;
  g_trace = nullptr;
}

void KernelTrace::add_dropped(size_t n) { dropped_ += n; }

void KernelTrace::add(TraceRecord r) {
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(std::move(r));
}

std::string KernelTrace::report(int steps, int top) {
  int current = 0, count = 0;
  if (cudaGetDevice(&current) == cudaSuccess && cudaGetDeviceCount(&count) == cudaSuccess) {
    for (int d = 0; d < count; ++d)
      if (cudaSetDevice(d) == cudaSuccess) cudaDeviceSynchronize();
    cudaSetDevice(current);
  }
  stop();
  std::vector<TraceRecord> recs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recs.swap(records_);
  }
  if (recs.empty() || steps < 1) return "kernel trace: nothing recorded\n";
  std::sort(recs.begin(), recs.end(), [](const TraceRecord& a, const TraceRecord& b) { return a.start < b.start; });
  // The union of the intervals over all streams (busy), and totals per name.
  uint64_t busy = 0, last_end = 0, cur_start = recs.front().start, cur_end = recs.front().start;
  double conv_ns = 0, kernel_ns = 0, copy_ns = 0, memset_ns = 0;
  const std::regex conv("xmma|gemm|fprop|dgrad|wgrad|convolution", std::regex::icase);
  struct Total {
    double ns = 0;
    long calls = 0;
  };
  std::map<std::string, Total> by_name;
  for (const TraceRecord& r : recs) {
    if (r.start > cur_end) {
      busy += cur_end - cur_start;
      cur_start = r.start;
    }
    cur_end = std::max(cur_end, r.end);
    last_end = std::max(last_end, r.end);
    const double ns = double(r.end - r.start);
    if (r.name == "[memset]") memset_ns += ns;
    else if (r.name.rfind("[copy", 0) == 0) copy_ns += ns;
    else {
      kernel_ns += ns;
      if (std::regex_search(r.name, conv)) conv_ns += ns;
    }
    Total& t = by_name[r.name];
    t.ns += ns, ++t.calls;
  }
  busy += cur_end - cur_start;
  const double per = 1e6 * steps;  // ns -> ms per step
  const double span = double(last_end - recs.front().start) / per;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "kernel trace of %d step(s) (CUPTI, every GPU and stream), ms per step:\n"
                "  span %.3f, busy %.3f (some kernel, copy or memset running), idle %.3f\n"
                "  kernels %.3f: convolution kernels %.3f, other %.3f; copies %.3f; memsets %.3f\n",
                steps, span, double(busy) / per, span - double(busy) / per, kernel_ns / per, conv_ns / per,
                (kernel_ns - conv_ns) / per, copy_ns / per, memset_ns / per);
  out += line;
  if (dropped_ > 0) {
    std::snprintf(line, sizeof line, "  WARNING: CUPTI dropped %zu record(s); the figures above miss them\n",
                  dropped_.load());
    out += line;
  }
  std::vector<std::pair<std::string, Total>> sorted(by_name.begin(), by_name.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::snprintf(line, sizeof line, "top %d: ms/step, calls/step, name\n", top);
  out += line;
  for (int i = 0; i < top && i < int(sorted.size()); ++i) {
    const auto& [name, t] = sorted[size_t(i)];
    std::snprintf(line, sizeof line, "  %8.3f %6.1f  %.110s\n", t.ns / per, double(t.calls) / steps, name.c_str());
    out += line;
  }
  return out;
}

}  // namespace trainer::bench
