// kernels/quant_scale_search.h — the scale searches of ggml's reference K-quant quantizers
// (internal to the kernels layer; used by quant_q*k*.cpp).
//
// Each function quantizes one sub-block of n values to integer levels L and returns the scale
// (and min) that best fits them by ggml's criterion. They reproduce ggml's float operations in
// order (so results match llama.cpp's `quantize` bit for bit). Cost: O(n * number of trials).
#pragma once

#include <cstdint>

namespace specdec::quant {

// Round to nearest, ties to even, for |x| <= 4194303 (ggml's nearest_int: adds 1.5 * 2^23 and
// reads the mantissa). Outside that range the result is meaningless but deterministic, as in ggml.
int nearest_int(float x);

// Symmetric levels L[i] in [0, 2*nmax) (value = (L - nmax) * scale), weights x^2, with a
// search over 18 scale tweaks around nmax / max (ggml make_qx_quants, rmse_type 1, no imatrix).
// Returns the scale (0 and all L = 0 when the sub-block is all (near) zero). Used by Q6_K.
float make_qx_quants_rmse(int n, int nmax, const float* x, int8_t* L);

// Symmetric levels L[i] in [0, 2*nmax) refined by coordinate descent on the weighted (x^2)
// error (ggml make_q3_quants with do_rmse). Returns the scale. Used by Q3_K with nmax 4.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// Asymmetric levels L[i] in [0, nmax] with value = scale * L - min_out (min_out >= 0), fitted
// by weighted least squares over nstep + 1 candidate scales (ggml make_qkx2_quants).
// Laux: scratch of n bytes. use_mad: absolute instead of squared error. Returns the scale.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* min_out, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad);

}  // namespace specdec::quant
