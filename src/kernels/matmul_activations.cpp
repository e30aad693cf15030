// 8-bit quantization of activation rows for the integer matmul paths (format: matmul_internal.h).
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

void quantize_activations(const float* x, int M, int64_t n_in, const QuantizedActs& out) {
  const int64_t n_pad = out.n_pad;
  const int64_t n_lanes = n_pad / 4;
  for (int r = 0; r < M; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n_in;        // (n_in)
    int8_t* ar = out.values + static_cast<int64_t>(r) * out.row_stride;  // (n_pad) of (row_stride)
    float* lr = out.lane_scale + static_cast<int64_t>(r) * (out.row_stride / 4);  // (n_pad / 4)
    float* sr = out.sums16 + static_cast<int64_t>(r) * out.group_stride;  // (n_groups_pad)
    int32_t* b32 = out.neg128_sums32 + static_cast<int64_t>(r) * (out.row_stride / 32);  // (n_pad / 32)
    int32_t* b16 = out.neg32_sums16 + static_cast<int64_t>(r) * out.group_stride;  // (n_groups_pad)
    float* s32 = out.sums32 + static_cast<int64_t>(r) * (out.row_stride / 32);  // (n_pad / 32)
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
      for (int lane = 0; lane < 8; ++lane) lr[b / 4 + lane] = d;
      int sum32 = 0;
      for (int g = 0; g < 2; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += ar[b + 16 * g + i];
        sr[b / 16 + g] = d * static_cast<float>(sum);
        b16[b / 16 + g] = -32 * sum;
        sum32 += sum;
      }
      b32[b / 32] = -128 * sum32;
      s32[b / 32] = static_cast<float>(sum32);
    }
    std::memset(ar + n_in, 0, static_cast<size_t>(n_pad - n_in));
    for (int64_t lane = n_in / 4; lane < n_lanes; ++lane) lr[lane] = 0.0f;
    for (int64_t g = n_in / 16; g < out.n_groups_pad; ++g) sr[g] = 0.0f, b16[g] = 0;
    for (int64_t b = n_in / 32; b < n_pad / 32; ++b) b32[b] = 0, s32[b] = 0.0f;
  }
}

}  // namespace specdec::matmul_detail
