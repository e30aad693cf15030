// measure_compute_peak(): calibration, threads and timing around the per-ISA product loops
// (compute_peak_avx2.cpp, compute_peak_avx512.cpp).
#include "specdec/compute_peak.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/compute_peak_internal.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/thread_pool.h"

namespace specdec {

namespace {

using namespace compute_peak_detail;

using Loop = uint64_t (*)(int64_t);

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best rate (multiply-adds / s / 1e9) over `passes` passes of `loop` on every pool thread at
// once, each pass about pass_seconds long (iterations calibrated on the calling thread).
double best_rate(ThreadPool& pool, Loop loop, int64_t macs_per_iteration, int passes, double pass_seconds) {
  volatile uint64_t sink = 0;
  int64_t iterations = 1 << 12;
  for (;;) {  // calibration: until one run takes >= 1/8 of a pass
    const auto start = std::chrono::steady_clock::now();
    sink = sink + loop(iterations);
    const double seconds = seconds_since(start);
    if (seconds >= pass_seconds / 8 || iterations >= (int64_t{1} << 40)) {
      iterations = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(iterations) * pass_seconds /
                                                                        std::max(seconds, 1e-9))));
      break;
    }
    iterations *= 4;
  }
  const int n_threads = pool.size();
  std::vector<uint64_t> checksums(static_cast<size_t>(n_threads));  // (n_threads)
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(n_threads, [&](int task, int) { checksums[static_cast<size_t>(task)] = loop(iterations); },
                      ThreadPool::Schedule::kStatic);  // every thread at the same time
    const double seconds = seconds_since(start);
    if (seconds > 0)
      best = std::max(best, static_cast<double>(iterations) * static_cast<double>(macs_per_iteration) * n_threads / seconds / 1e9);
  }
  for (uint64_t c : checksums) sink = sink + c;
  return best;
}

}  // namespace

ComputePeak measure_compute_peak(ThreadPool& pool, int passes, double pass_seconds) {
  if (passes < 1) throw Error("compute peak probe: passes = " + std::to_string(passes) + " (need >= 1)");
  if (!(pass_seconds > 0 && pass_seconds <= 10))
    throw Error("compute peak probe: pass_seconds = " + std::to_string(pass_seconds) + " (need 0 < s <= 10)");
  struct Family {
    Loop loop;
    int64_t macs_per_iteration;
    const char* instruction;
  };
  struct IsaFamilies {
    Family int8, f32;
  };
  static const IsaFamilies avx512{{int8_loop_avx512, kInt8MacsAvx512, "vpdpbusd zmm"},
                                  {f32_loop_avx512, kF32MacsAvx512, "vfmadd231ps zmm"}};
  static const IsaFamilies avx2{{int8_loop_avx2, kInt8MacsAvx2, "vpmaddubsw+vpaddw ymm"},
                                {f32_loop_avx2, kF32MacsAvx2, "vfmadd231ps ymm"}};
  static const IsaFamilies avx_vnni{{int8_loop_avx_vnni, kInt8MacsVnni256, "vpdpbusd ymm"}, avx2.f32};
  static const IsaFamilies evex_vnni{{int8_loop_evex_vnni256, kInt8MacsVnni256, "vpdpbusd ymm (evex)"}, avx2.f32};
  const IsaFamilies* families = nullptr;  // none on the scalar path: no roofline for the reference
  switch (active_isa()) {
    case Isa::Avx512: families = &avx512; break;
    case Isa::Avx2Vnni: families = avx_vnni_detected() ? &avx_vnni : &evex_vnni; break;
    case Isa::Avx2: families = &avx2; break;
    case Isa::Scalar: break;
  }
  ComputePeak peak;
  if (families == nullptr) return peak;
  peak.int8_gmacs = best_rate(pool, families->int8.loop, families->int8.macs_per_iteration, passes, pass_seconds);
  peak.f32_gmacs = best_rate(pool, families->f32.loop, families->f32.macs_per_iteration, passes, pass_seconds);
  peak.int8_instruction = families->int8.instruction;
  peak.f32_instruction = families->f32.instruction;
  return peak;
}

}  // namespace specdec
