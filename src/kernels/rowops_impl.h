// kernels/rowops_impl.h — per-ISA versions of the element-wise kernels (internal to the
// kernels layer; rowops.cpp dispatches on active_isa()).
//
// swiglu: out[i] = (g * s) * up[i] with g = gate[i], t = exp_nonpositive(-|g|) and
// s = (g >= 0 ? 1 : t) / (1 + t), the sigmoid written so that exp only sees x <= 0. Every
// version runs that sequence of float operations per element (exp_nonpositive.h), so the
// scalar, AVX2 and AVX-512 outputs are the same bits, and an element's result does not depend
// on n or on its position.
#pragma once

namespace specdec::kernels_detail {

void swiglu_scalar(const float* gate, const float* up, int n, float* out);
void swiglu_avx2(const float* gate, const float* up, int n, float* out);
void swiglu_avx512(const float* gate, const float* up, int n, float* out);

}  // namespace specdec::kernels_detail
