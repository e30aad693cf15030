// kernels/rope.cpp — rotary position embedding, Norm (Llama) and NEOX (Qwen2/GPT-NeoX) layouts.
//
// The angles are computed in double from the position alone (no running product), then
// rounded to float cos/sin, so a row's result depends only on (x, pos, params).
#include <cmath>
#include <string>
#include <vector>

#include "kernels/rowops_impl.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"

namespace specdec {

namespace {

void check_params(int head_dim, const RopeParams& p) {
  SPECDEC_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim,
                "rope: n_rot " + std::to_string(p.n_rot) + " for head_dim " + std::to_string(head_dim));
}

}  // namespace

void rope_cos_sin(int pos, const RopeParams& p, float* cos_sin) {
  const int n_pairs = p.n_rot / 2;
  for (int i = 0; i < n_pairs; ++i) {
    // theta_i = pos * freq_scale * base^(-2i / n_rot) / factor_i
    double theta = static_cast<double>(pos) * static_cast<double>(p.freq_scale) *
                   std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) theta /= static_cast<double>(p.freq_factors[i]);
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

namespace kernels_detail {

void rope_head_scalar(float* head, const float* cos_sin, int i_begin, int n_pairs, bool norm) {
  // NORM pairs (2i, 2i+1); NEOX pairs (i, i + n_rot/2).
  const int pair_stride = norm ? 1 : n_pairs;
  for (int i = i_begin; i < n_pairs; ++i) {
    const int i0 = norm ? 2 * i : i;
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const float x0 = head[i0], x1 = head[i0 + pair_stride];
    head[i0] = x0 * c - x1 * s;
    head[i0 + pair_stride] = x0 * s + x1 * c;
  }
}

void rope_apply_scalar(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p) {
  for (int h = 0; h < n_heads; ++h) {
    rope_head_scalar(x + static_cast<size_t>(h) * head_dim, cos_sin, 0, p.n_rot / 2, p.layout == RopeLayout::Norm);
  }
}

}  // namespace kernels_detail

void rope_apply(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p) {
  check_params(head_dim, p);
  switch (vector_isa(active_isa())) {
    case Isa::Avx512: kernels_detail::rope_apply_avx512(x, n_heads, head_dim, cos_sin, p); break;
    case Isa::Avx2: kernels_detail::rope_apply_avx2(x, n_heads, head_dim, cos_sin, p); break;
    default: kernels_detail::rope_apply_scalar(x, n_heads, head_dim, cos_sin, p); break;
  }
}

void rope(float* x, int n_heads, int head_dim, int pos, const RopeParams& p) {
  check_params(head_dim, p);
  thread_local std::vector<float> cos_sin;  // (n_rot / 2, 2)
  cos_sin.resize(static_cast<size_t>(p.n_rot));
  rope_cos_sin(pos, p, cos_sin.data());
  rope_apply(x, n_heads, head_dim, cos_sin.data(), p);
}

}  // namespace specdec
