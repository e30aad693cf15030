// tests/kernels/matmul_random_weights.h — random weight matrices of every type for the matmul
// tests: random bytes (valid quantized values for every layout) with finite random binary16 scales.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant_blocks.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"

namespace specdec::test_matmul {

using namespace quant;

inline const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                  DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                  DType::Q4_K, DType::Q5_K, DType::Q6_K};

inline bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

inline float uniform(Rng& rng, float lo, float hi) { return lo + (hi - lo) * static_cast<float>(rng.uniform()); }

inline uint16_t random_scale(Rng& rng, float magnitude) {
  const float v = uniform(rng, 0.25f, 1.0f) * magnitude;
  return f32_to_fp16(rng.below(4) == 0 ? -v : v);
}

// Sets the binary16 scale fields of every block to finite random values (the random bytes
// elsewhere are valid quantized values for every layout).
template <typename Block, typename Fn>
void patch_blocks(uint8_t* data, size_t n_bytes, Fn fn) {
  for (size_t off = 0; off + sizeof(Block) <= n_bytes; off += sizeof(Block)) {
    Block b;
    std::memcpy(&b, data + off, sizeof(Block));
    fn(b);
    std::memcpy(data + off, &b, sizeof(Block));
  }
}

// n_out rows of n_in random weights of `type`, rows packed back to back.
inline std::vector<uint8_t> random_weights(DType type, int64_t n_out, int64_t n_in, Rng& rng) {
  const size_t row_bytes = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> data(row_bytes * static_cast<size_t>(n_out));  // (n_out, row_bytes)
  if (is_float(type)) {
    for (int64_t i = 0; i < n_out * n_in; ++i) {
      const float v = uniform(rng, -1.0f, 1.0f);
      if (type == DType::F32) std::memcpy(data.data() + 4 * i, &v, 4);
      const uint16_t h = type == DType::F16 ? f32_to_fp16(v) : f32_to_bf16(v);
      if (type != DType::F32) std::memcpy(data.data() + 2 * i, &h, 2);
    }
    return data;
  }
  for (auto& byte : data) byte = static_cast<uint8_t>(rng.below(256));
  const size_t n = data.size();
  uint8_t* p = data.data();
  auto d_only = [&](auto& b) { b.d = random_scale(rng, 0.01f); };
  auto d_m = [&](auto& b) { b.d = random_scale(rng, 0.01f); b.m = random_scale(rng, 0.05f); };
  auto d_dmin = [&](auto& b) { b.d = random_scale(rng, 0.01f); b.dmin = random_scale(rng, 0.01f); };
  switch (type) {
    case DType::Q4_0: patch_blocks<BlockQ4_0>(p, n, d_only); break;
    case DType::Q4_1: patch_blocks<BlockQ4_1>(p, n, d_m); break;
    case DType::Q5_0: patch_blocks<BlockQ5_0>(p, n, d_only); break;
    case DType::Q5_1: patch_blocks<BlockQ5_1>(p, n, d_m); break;
    case DType::Q8_0: patch_blocks<BlockQ8_0>(p, n, d_only); break;
    case DType::Q2_K: patch_blocks<BlockQ2_K>(p, n, d_dmin); break;
    case DType::Q3_K: patch_blocks<BlockQ3_K>(p, n, d_only); break;
    case DType::Q4_K: patch_blocks<BlockQ4_K>(p, n, d_dmin); break;
    case DType::Q5_K: patch_blocks<BlockQ5_K>(p, n, d_dmin); break;
    case DType::Q6_K: patch_blocks<BlockQ6_K>(p, n, d_only); break;
    default: ADD_FAILURE() << "no generator for " << dtype_name(type);
  }
  return data;
}

// Frees a buffer from std::aligned_alloc (repacked copies), for std::unique_ptr.
struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace specdec::test_matmul
