// specdec/compute_peak.h — the machine's peak multiply-add rate on the instructions the matmul
// kernels multiply with, measured: the compute roofline for verify rows and prefill, as the
// read bandwidth (bandwidth.h) is the memory roofline for decode.
#pragma once

#include <string>

namespace specdec {

class ThreadPool;

struct ComputePeak {
  // 8-bit products (the quantized kernels): multiply-adds per second / 1e9, all threads.
  double int8_gmacs = 0;
  // f32 fused multiply-adds (F16, BF16 and F32 weights): per second / 1e9, all threads.
  double f32_gmacs = 0;
  std::string int8_instruction;  // e.g. "vpdpbusd zmm"; empty when not measured
  std::string f32_instruction;   // e.g. "vfmadd231ps zmm"
};

// Measures, on active_isa(), the multiply-add rate of the kernels' product instructions: on
// AVX-512 VNNI vpdpbusd (64 8-bit products per instruction) and 512-bit FMA; on AVX2 vpmaddubsw
// with the 16-bit add the AVX2 tiles pair it with (32 products) and 256-bit FMA. Each pool
// thread runs 12 independent accumulator chains (enough to cover the instructions' latency)
// for about `pass_seconds`; a pass's rate is all threads' multiply-adds over the wall time of
// the slowest; the best of `passes` passes is returned. No loads or stores in the loops: this
// is the instructions' throughput, which a kernel that also unpacks weights and scales sums
// can only approach. On the scalar path nothing is measured (zeros, empty instruction names).
// Requires passes >= 1 and pass_seconds in (0, 10] (Error naming the value otherwise).
// Cost: about passes * pass_seconds per family, plus a short calibration.
ComputePeak measure_compute_peak(ThreadPool& pool, int passes = 5, double pass_seconds = 0.02);

}  // namespace specdec
