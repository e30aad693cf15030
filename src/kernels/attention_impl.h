// kernels/attention_impl.h — per-ISA inner loops of attention (internal to the kernels layer).
//
// Both functions treat each (query, key) pair independently with one fixed order per ISA, so
// a query's result never depends on n_q (how many queries share the keys in this call) nor on
// n_keys (how many keys one call covers): a block of keys only lets a query's loads, and its
// running output, stay in registers across the block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec::attention_detail {

// Values per call of the weighted sums (at most): 64 value slices of a 64-float head are 16 KiB
// in F32, which stay in L1 while every query of the call reads them.
constexpr int kKeyBlock = 64;
// Keys per call of the scores (at most). The AVX2 and 4-key AVX-512 loops hold a few keys in L1
// or registers while every query passes, so the block size does not matter to them; the AVX-512
// lane loop (16 queries per pass) rereads the call's keys from L2 (64 KiB) for each further 16,
// and pays its fixed cost (four 16 x 16 transposes of the queries) once per call: at 64 keys,
// that took ~15% of a 32-query call's time.
constexpr int kScoreKeyBlock = 256;

// For key rows keys[j] (head_dim floats each), j < n_keys <= kScoreKeyBlock:
// scores[i * score_stride + j] = dot(q_i, keys[j]) * scale for i < n_q, with
// q_i = q + i * head_dim (queries contiguous: (n_q, head_dim)).
void scores_scalar(const float* q, int n_q, const float* const* keys, int n_keys, int head_dim, float scale,
                   float* scores, size_t score_stride);
// For value rows values[j], j < n_keys <= kKeyBlock, in order of j:
// out_i[d] += weights[i * weight_stride + j] * values[j][d] for i < n_q,
// out_i = out + i * head_dim ((n_q, head_dim)).
void accumulate_scalar(const float* weights, size_t weight_stride, int n_q, const float* const* values, int n_keys,
                       int head_dim, float* out);

void scores_avx2(const float* q, int n_q, const float* const* keys, int n_keys, int head_dim, float scale,
                 float* scores, size_t score_stride);
void accumulate_avx2(const float* weights, size_t weight_stride, int n_q, const float* const* values, int n_keys,
                     int head_dim, float* out);

// The same over F16 keys / values (IEEE binary16), each converted to float exactly where it
// is loaded: bit for bit the float functions on the converted rows.
void scores_scalar_f16(const float* q, int n_q, const uint16_t* const* keys, int n_keys, int head_dim, float scale,
                       float* scores, size_t score_stride);
void accumulate_scalar_f16(const float* weights, size_t weight_stride, int n_q, const uint16_t* const* values,
                           int n_keys, int head_dim, float* out);
void scores_avx2_f16(const float* q, int n_q, const uint16_t* const* keys, int n_keys, int head_dim, float scale,
                     float* scores, size_t score_stride);
void accumulate_avx2_f16(const float* weights, size_t weight_stride, int n_q, const uint16_t* const* values,
                         int n_keys, int head_dim, float* out);

// AVX-512 machines (attention_avx512.cpp): the AVX2 functions' bits, with more operands held
// in registers (head_dim 64; other sizes call the AVX2 functions).
void scores_avx512(const float* q, int n_q, const float* const* keys, int n_keys, int head_dim, float scale,
                   float* scores, size_t score_stride);
void accumulate_avx512(const float* weights, size_t weight_stride, int n_q, const float* const* values, int n_keys,
                       int head_dim, float* out);
void scores_avx512_f16(const float* q, int n_q, const uint16_t* const* keys, int n_keys, int head_dim, float scale,
                       float* scores, size_t score_stride);
void accumulate_avx512_f16(const float* weights, size_t weight_stride, int n_q, const uint16_t* const* values,
                           int n_keys, int head_dim, float* out);

// Softmax of n values in place (specdec::softmax's contract), vectorised: a polynomial exp,
// so not the scalar path's bits, but one fixed order for a given n.
void softmax_avx2(float* x, int n);
// The same bits with 16-lane exps (the exp is elementwise; the double sums keep the AVX2
// order), for AVX-512 machines: the exps are most of a long-context verify's softmax.
void softmax_avx512(float* x, int n);

}  // namespace specdec::attention_detail
