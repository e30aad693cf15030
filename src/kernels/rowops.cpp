// kernels/rowops.cpp — elementwise and per-row kernels (fixed order), and the dispatch of the
// ones with SIMD versions.
//
// These run once per row per layer and cost O(n) next to the O(n^2) matmuls. Every version of
// a kernel gives the same bits (rowops_impl.h), so no result depends on the dispatch target.
// Reductions accumulate in double and round once: softmax's sum in index order, like ggml;
// rmsnorm's sum of squares in 32 lanes, which its AVX2 and AVX-512 versions keep in registers
// (the index-order chain took ~1.3 ns per value: a 9-row verify's norms cost as much as a
// small matrix). swiglu, which runs over the n_ff-wide hidden rows and was 4-10% of a verify
// forward with std::exp (~3 ns per element), has AVX2 and AVX-512 versions too; so has rope
// (rope.cpp).
#include <cmath>

#include "kernels/exp_nonpositive.h"
#include "kernels/rowops_impl.h"
#include "specdec/cpu.h"
#include "specdec/kernels.h"

namespace specdec {

namespace kernels_detail {

void swiglu_scalar(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    const float t = exp_nonpositive_scalar(-std::fabs(g));
    const float s = (g >= 0.0f ? 1.0f : t) / (1.0f + t);
    out[i] = (g * s) * up[i];
  }
}

double sum_squares_scalar(const float* x, int n) {
  double lanes[kSumLanes] = {};
  return finish_sum_squares(lanes, x, 0, n);
}

void rmsnorm_scalar(const float* x, const float* weight, int n, float eps, float* y) {
  const float scale = rms_scale(sum_squares_scalar(x, n), n, eps);
  for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
}

}  // namespace kernels_detail

void rmsnorm(const float* x, const float* weight, int n, float eps, float* y) {
  switch (vector_isa(active_isa())) {
    case Isa::Avx512: kernels_detail::rmsnorm_avx512(x, weight, n, eps, y); break;
    case Isa::Avx2: kernels_detail::rmsnorm_avx2(x, weight, n, eps, y); break;
    default: kernels_detail::rmsnorm_scalar(x, weight, n, eps, y); break;
  }
}

void softmax(float* x, int n) {
  if (n <= 0) return;
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += static_cast<double>(x[i]);
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv_sum;
}

void swiglu(const float* gate, const float* up, int n, float* out) {
  switch (vector_isa(active_isa())) {
    case Isa::Avx512: kernels_detail::swiglu_avx512(gate, up, n, out); break;
    case Isa::Avx2: kernels_detail::swiglu_avx2(gate, up, n, out); break;
    default: kernels_detail::swiglu_scalar(gate, up, n, out); break;
  }
}

void add_inplace(float* y, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace specdec
