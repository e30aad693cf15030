// Decoding of quantized weight rows into the integer-kernel form of matmul_internal.h:
// w[i] = scale16[i / 16] * q[i] + min16[i / 16], q signed 8-bit. Block layouts: quant_blocks.h;
// the value order within each block follows ggml's reference dequantization (quant_*.cpp).
#include <cstring>
#include <string>

#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_rows.h"
#include "specdec/error.h"

namespace specdec::matmul_detail {

namespace {

using namespace quant;

// Writes the scale and additive term of group g (16 values) of the row.
struct GroupWriter {
  const UnpackedRow& out;
  bool has_min = false;
  void set(int64_t g, float scale, float min) {
    out.scale16[g] = scale;
    out.min16[g] = min;
    if (min != 0.0f) has_min = true;
  }
};

template <typename Block>
const Block* blocks_of(const void* row) { return static_cast<const Block*>(row); }

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- legacy 32-value blocks: value j in qs[j] low nibble, value j + 16 in its high nibble
void unpack_q4_0(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_0& blk = blocks_of<BlockQ4_0>(row)[b];
    int8_t* qb = q + 32 * b;
    for (int j = 0; j < 16; ++j) {
      qb[j] = static_cast<int8_t>((blk.qs[j] & 0xF) - 8);
      qb[j + 16] = static_cast<int8_t>((blk.qs[j] >> 4) - 8);
    }
    const float d = fp16_to_f32(blk.d);
    gw.set(2 * b, d, 0.0f);
    gw.set(2 * b + 1, d, 0.0f);
  }
}

void unpack_q4_1(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_1& blk = blocks_of<BlockQ4_1>(row)[b];
    int8_t* qb = q + 32 * b;
    for (int j = 0; j < 16; ++j) {
      qb[j] = static_cast<int8_t>(blk.qs[j] & 0xF);
      qb[j + 16] = static_cast<int8_t>(blk.qs[j] >> 4);
    }
    const float d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m);
    gw.set(2 * b, d, m);
    gw.set(2 * b + 1, d, m);
  }
}

// Q5: bit j of qh is the fifth bit of value j (j < 32).
template <typename Block, int kOffset>
void unpack_q5(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const Block& blk = blocks_of<Block>(row)[b];
    const uint32_t qh = read_u32(blk.qh);
    int8_t* qb = q + 32 * b;
    for (int j = 0; j < 16; ++j) {
      const int lo = (blk.qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (blk.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      qb[j] = static_cast<int8_t>(lo - kOffset);
      qb[j + 16] = static_cast<int8_t>(hi - kOffset);
    }
    const float d = fp16_to_f32(blk.d);
    float m = 0.0f;
    if constexpr (kOffset == 0) m = fp16_to_f32(blk.m);
    gw.set(2 * b, d, m);
    gw.set(2 * b + 1, d, m);
  }
}

void unpack_q8_0(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ8_0& blk = blocks_of<BlockQ8_0>(row)[b];
    std::memcpy(q + 32 * b, blk.qs, 32);
    const float d = fp16_to_f32(blk.d);
    gw.set(2 * b, d, 0.0f);
    gw.set(2 * b + 1, d, 0.0f);
  }
}

// ---- K-quants, 256-value super-blocks (16 groups of 16 values each)
void unpack_q2_k(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& blk = blocks_of<BlockQ2_K>(row)[b];
    const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
    int8_t* out = q + 256 * b;
    int is = 0;
    for (int n = 0; n < 2; ++n) {
      const uint8_t* qs = blk.qs + 32 * n;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = blk.scales[is];
          gw.set(16 * b + is, d * static_cast<float>(sc & 0xF), -(dmin * static_cast<float>(sc >> 4)));
          for (int l = 0; l < 16; ++l) *out++ = static_cast<int8_t>((qs[l + 16 * half] >> shift) & 3);
          ++is;
        }
      }
    }
  }
}

void unpack_q3_k(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& blk = blocks_of<BlockQ3_K>(row)[b];
    // 16 six-bit scales: low 4 bits in bytes 0..7 (low then high nibbles), top 2 bits in 8..11.
    int8_t scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? (blk.scales[j] & 0xF) : (blk.scales[j - 8] >> 4);
      const int high = (blk.scales[8 + (j % 4)] >> (2 * (j / 4))) & 3;
      scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    const float d = fp16_to_f32(blk.d);
    int8_t* out = q + 256 * b;
    int is = 0;
    uint8_t mask = 1;
    for (int n = 0; n < 2; ++n) {
      const uint8_t* qs = blk.qs + 32 * n;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          gw.set(16 * b + is, d * static_cast<float>(scales[is]), 0.0f);
          for (int l = 0; l < 16; ++l) {
            const int idx = l + 16 * half;
            const int v = ((qs[idx] >> shift) & 3) - ((blk.hmask[idx] & mask) ? 0 : 4);
            *out++ = static_cast<int8_t>(v);
          }
          ++is;
        }
        mask = static_cast<uint8_t>(mask << 1);
      }
    }
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; value order per 64 values:
// 32 low nibbles of qs[32j..], then their 32 high nibbles.
template <bool kFiveBit>
void unpack_q45_k(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* qs;
    const uint8_t* qh = nullptr;
    const uint8_t* scales;
    float d, dmin;
    if constexpr (kFiveBit) {
      const BlockQ5_K& blk = blocks_of<BlockQ5_K>(row)[b];
      qs = blk.qs; qh = blk.qh; scales = blk.scales;
      d = fp16_to_f32(blk.d); dmin = fp16_to_f32(blk.dmin);
    } else {
      const BlockQ4_K& blk = blocks_of<BlockQ4_K>(row)[b];
      qs = blk.qs; scales = blk.scales;
      d = fp16_to_f32(blk.d); dmin = fp16_to_f32(blk.dmin);
    }
    int8_t* out = q + 256 * b;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * j + half;
        uint8_t sc, m;
        unpack_scale_min_k4(sub, scales, &sc, &m);
        const float scale = d * static_cast<float>(sc), min = -(dmin * static_cast<float>(m));
        gw.set(16 * b + 2 * sub, scale, min);
        gw.set(16 * b + 2 * sub + 1, scale, min);
        const uint8_t high_bit = static_cast<uint8_t>(1u << sub);
        for (int l = 0; l < 32; ++l) {
          int v = half == 0 ? (qs[32 * j + l] & 0xF) : (qs[32 * j + l] >> 4);
          if constexpr (kFiveBit) v += (qh[l] & high_bit) ? 16 : 0;
          *out++ = static_cast<int8_t>(v);
        }
      }
    }
  }
}

void unpack_q6_k(const void* row, int64_t n_blocks, GroupWriter& gw, int8_t* q) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& blk = blocks_of<BlockQ6_K>(row)[b];
    const float d = fp16_to_f32(blk.d);
    for (int g = 0; g < 16; ++g) gw.set(16 * b + g, d * static_cast<float>(blk.scales[g]), 0.0f);
    for (int n = 0; n < 2; ++n) {
      const uint8_t* ql = blk.ql + 64 * n;
      const uint8_t* qh = blk.qh + 32 * n;
      int8_t* out = q + 256 * b + 128 * n;
      for (int l = 0; l < 32; ++l) {
        out[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
  }
}

}  // namespace

bool is_float_weight(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16;
}

bool unpack_row_scalar(DType type, const void* row, int64_t n_in, const UnpackedRow& out) {
  GroupWriter gw{out};
  const int64_t n32 = n_in / 32, n256 = n_in / 256;
  switch (type) {
    case DType::Q4_0: unpack_q4_0(row, n32, gw, out.q); break;
    case DType::Q4_1: unpack_q4_1(row, n32, gw, out.q); break;
    case DType::Q5_0: unpack_q5<BlockQ5_0, 16>(row, n32, gw, out.q); break;
    case DType::Q5_1: unpack_q5<BlockQ5_1, 0>(row, n32, gw, out.q); break;
    case DType::Q8_0: unpack_q8_0(row, n32, gw, out.q); break;
    case DType::Q2_K: unpack_q2_k(row, n256, gw, out.q); break;
    case DType::Q3_K: unpack_q3_k(row, n256, gw, out.q); break;
    case DType::Q4_K: unpack_q45_k<false>(row, n256, gw, out.q); break;
    case DType::Q5_K: unpack_q45_k<true>(row, n256, gw, out.q); break;
    case DType::Q6_K: unpack_q6_k(row, n256, gw, out.q); break;
    default:
      throw Error(std::string("matmul: no integer path for weight type ") + dtype_name(type));
  }
  const int64_t n_pad = padded_values(n_in), n_groups_pad = padded_groups(n_in);
  std::memset(out.q + n_in, 0, static_cast<size_t>(n_pad - n_in));
  for (int64_t g = n_in / 16; g < n_groups_pad; ++g) out.scale16[g] = out.min16[g] = 0.0f;
  return gw.has_min;
}

}  // namespace specdec::matmul_detail
