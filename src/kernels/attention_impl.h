// kernels/attention_impl.h — per-ISA inner loops of attention (internal to the kernels layer).
//
// Both functions treat each query independently with one fixed order per ISA, so a query's
// result never depends on n_q (how many queries share the key row in this call).
#pragma once

#include <cstddef>

namespace specdec::attention_detail {

// For one key row k (head_dim floats): scores[i * score_stride] = dot(q_i, k) * scale for
// i < n_q, with q_i = q + i * head_dim (queries contiguous: (n_q, head_dim)).
void scores_scalar(const float* q, int n_q, const float* k, int head_dim, float scale,
                   float* scores, size_t score_stride);
// For one value row v: out_i[d] += weights[i * weight_stride] * v[d] for i < n_q,
// out_i = out + i * head_dim ((n_q, head_dim)).
void accumulate_scalar(const float* weights, size_t weight_stride, int n_q, const float* v,
                       int head_dim, float* out);

void scores_avx2(const float* q, int n_q, const float* k, int head_dim, float scale,
                 float* scores, size_t score_stride);
void accumulate_avx2(const float* weights, size_t weight_stride, int n_q, const float* v,
                     int head_dim, float* out);

}  // namespace specdec::attention_detail
