// 8-bit quantization of activation rows for the integer matmul paths (format: matmul_internal.h).
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

void quantize_activations(const float* x, int M, int64_t n_in, const QuantizedActs& out) {
  for (int r = 0; r < M; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n_in;        // (n_in)
    const QuantizedActs row = acts_from_row(out, r);
    int8_t* ar = row.values;  // (n_pad)
    for (int64_t b = 0; b < n_in; b += 32) {
      float amax = 0.0f;
      bool finite = true;
      for (int i = 0; i < 32; ++i) {
        const float v = xr[b + i];
        if (!std::isfinite(v)) finite = false;
        amax = std::fmax(amax, std::fabs(v));
      }
      float d = amax / 127.0f;
      const float inv_d = (finite && d > 0.0f) ? 1.0f / d : 0.0f;
      if (!finite) d = std::numeric_limits<float>::quiet_NaN();
      for (int i = 0; i < 32; ++i) {
        float q = std::round(xr[b + i] * inv_d);
        q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
        ar[b + i] = static_cast<int8_t>(finite ? q : 0.0f);
      }
      int sum[2] = {0, 0};  // of the two groups of 16
      for (int i = 0; i < 32; ++i) sum[i / 16] += ar[b + i];
      store_block_terms(row, b / 32, d, sum[0], sum[1]);
    }
    zero_act_padding(row, n_in);
  }
}

void zero_act_padding(const QuantizedActs& row, int64_t n_in) {
  std::memset(row.values + n_in, 0, static_cast<size_t>(row.n_pad - n_in));
  for (int64_t g = n_in / 16; g < row.n_groups_pad; ++g) row.sums16[g] = 0.0f, row.neg32_sums16[g] = 0;
  for (int64_t b = n_in / 32; b < row.n_pad / 32; ++b) {
    row.scales32[b] = 0.0f, row.neg128_sums32[b] = 0, row.sums32[b] = 0.0f;
    if (row.scales32_bm != nullptr) row.scales32_bm[b * row.block_stride] = 0.0f, row.sums32_bm[b * row.block_stride] = 0.0f;
  }
}

}  // namespace specdec::matmul_detail
