// tests/kernels/tensor_helpers.h — whole-tensor helpers shared by the quantization tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/gguf.h"
#include "specdec/kernels.h"

namespace specdec::testing {

// Dequantizes every row of a tensor. Returns (n_elements / dims[0], dims[0]) row-major floats.
inline std::vector<float> dequantize_tensor(const GgufTensorInfo& t) {
  const int64_t n_per_row = t.dims[0];
  const int64_t n_rows = t.n_elements() / n_per_row;
  const size_t row_bytes = dtype_row_bytes(t.type, n_per_row);
  std::vector<float> out(static_cast<size_t>(t.n_elements()));  // (n_rows, n_per_row)
  for (int64_t r = 0; r < n_rows; ++r)
    dequantize_row(t.type, t.data + r * row_bytes, out.data() + r * n_per_row, n_per_row);
  return out;
}

// Relative RMS error ||got - ref|| / ||ref|| (in double).
inline double rel_rms(const std::vector<float>& ref, const std::vector<float>& got) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(err / norm);
}

}  // namespace specdec::testing
