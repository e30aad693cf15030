// kernels/rowops_impl.h — per-ISA versions of the row kernels (internal to the kernels layer;
// rowops.cpp and rope.cpp dispatch on active_isa()). Every version of a kernel runs the same
// float operations per element in the same order, so the scalar, AVX2 and AVX-512 outputs are
// the same bits and a model's output does not depend on the machine; each contract says how.
//
// swiglu: out[i] = (g * s) * up[i] with g = gate[i], t = exp_nonpositive(-|g|) and
// s = (g >= 0 ? 1 : t) / (1 + t), the sigmoid written so that exp only sees x <= 0. Every
// version runs that sequence of float operations per element (exp_nonpositive.h), so the
// scalar, AVX2 and AVX-512 outputs are the same bits, and an element's result does not depend
// on n or on its position.
//
// rmsnorm: y[i] = (x[i] * scale) * weight[i], scale = 1 / sqrt(float(sum / n) + eps). The sum of
// squares is accumulated in double in kSumLanes lanes: lane j adds float(x[i] * x[i]) for
// i = j, j + 32, j + 64, ... in order (the vector versions hold the lanes in registers, the
// scalar one in an array), then the lanes are added by the fixed tree of finish_sum_squares.
// Index-order summation (one chain of n dependent double adds, ~1.3 ns per value) had made the
// norms of a 9-row forward take as long as a small matrix's product.
//
// rope_apply: per rotated pair (x0, x1) with angle (c, s): x0' = x0 * c - x1 * s and
// x1' = x0 * s + x1 * c, each product rounded, then the sum (addition commutes exactly, so a
// vector version may add the products in either order). Norm pairs are (2i, 2i + 1), NEOX
// pairs (i, i + n_rot / 2); values past n_rot are not touched.
#pragma once

#include <cmath>

#include "specdec/kernels.h"

namespace specdec::kernels_detail {

void swiglu_scalar(const float* gate, const float* up, int n, float* out);
void swiglu_avx2(const float* gate, const float* up, int n, float* out);
void swiglu_avx512(const float* gate, const float* up, int n, float* out);

constexpr int kSumLanes = 32;

// Adds the squares of x[begin..n) to their lanes (lane i % kSumLanes, in index order), then
// reduces the lanes by the fixed tree (lane j += lane j + w for w = 16, 8, 4, 2, 1) and returns
// the sum. `lanes` holds kSumLanes partial sums over x[0..begin) and is overwritten.
inline double finish_sum_squares(double* lanes, const float* x, int begin, int n) {
  for (int i = begin; i < n; ++i) lanes[i % kSumLanes] += static_cast<double>(x[i] * x[i]);
  for (int w = kSumLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  }
  return lanes[0];
}

inline float rms_scale(double sum_squares, int n, float eps) {
  return 1.0f / std::sqrt(static_cast<float>(sum_squares / n) + eps);
}

double sum_squares_scalar(const float* x, int n);
double sum_squares_avx2(const float* x, int n);
double sum_squares_avx512(const float* x, int n);
void rmsnorm_scalar(const float* x, const float* weight, int n, float eps, float* y);
void rmsnorm_avx2(const float* x, const float* weight, int n, float eps, float* y);
void rmsnorm_avx512(const float* x, const float* weight, int n, float eps, float* y);

// One head's pairs [i_begin, n_pairs) (the vector versions' tails).
void rope_head_scalar(float* head, const float* cos_sin, int i_begin, int n_pairs, bool norm);
void rope_apply_scalar(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p);
void rope_apply_avx2(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p);
void rope_apply_avx512(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p);

}  // namespace specdec::kernels_detail
