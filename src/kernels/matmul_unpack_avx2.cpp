// AVX2 decoders of quantized weight rows into the integer-kernel form (matmul_internal.h):
// w[i] = scale16[i / 16] * q[i] + min16[i / 16], plus coef16 = min16 - 128 * scale16. They
// produce exactly the values of unpack_row_scalar (matmul_unpack.cpp documents the block
// layouts) with the same float operations, only vectorised. Used by the AVX2 path and by the
// AVX-512 path for the types its in-place tiles do not cover (AVX-512 machines have AVX2; one
// decoder per type keeps the two paths from drifting). Before they existed the AVX2 path spent
// nearly all its time in the scalar decoder (7-25x slower than AVX-512); Q2_K and Q3_K matmuls
// were 17-27x slower than Q4_K until they got decoders here too.
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

namespace {

using namespace quant;

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// Scale and additive term of the two groups of 16 of legacy block b.
inline void set_block_scales(const UnpackedRow& out, int64_t b, float scale, float min) {
  const float coef = min - 128.0f * scale;
  out.scale16[2 * b] = out.scale16[2 * b + 1] = scale;
  out.min16[2 * b] = out.min16[2 * b + 1] = min;
  out.coef16[2 * b] = out.coef16[2 * b + 1] = coef;
}

// 8 groups starting at group g from 8 scales and 8 additive terms.
inline void set_group_scales8(const UnpackedRow& out, int64_t g, __m256 scale, __m256 min) {
  _mm256_storeu_ps(out.scale16 + g, scale);
  _mm256_storeu_ps(out.min16 + g, min);
  _mm256_storeu_ps(out.coef16 + g, _mm256_sub_ps(min, _mm256_mul_ps(_mm256_set1_ps(128.0f), scale)));
}

// 32 values from 16 bytes: low nibbles first, then high nibbles.
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), mask), _mm_and_si128(v, mask));
}

// Byte j = 0x10 where bit j of the 32-bit qh is set, else 0.
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi64x(0x0000000000000000LL, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

template <typename Block, bool kFiveBit, bool kHasMin>
void unpack_legacy(const void* row, int64_t n_blocks, const UnpackedRow& out) {
  const Block* blocks = static_cast<const Block*>(row);
  const __m256i offset = _mm256_set1_epi8(kHasMin ? 0 : (kFiveBit ? 16 : 8));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const Block& blk = blocks[b];
    __m256i q = nibbles_32(blk.qs);
    float min = 0.0f;
    if constexpr (kFiveBit) {
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      q = _mm256_or_si256(q, fifth_bits(qh));
    }
    if constexpr (kHasMin) min = half_to_float(blk.m);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + 32 * b), _mm256_sub_epi8(q, offset));
    set_block_scales(out, b, half_to_float(blk.d), min);
  }
}

void unpack_q8_0(const void* row, int64_t n_blocks, const UnpackedRow& out) {
  const BlockQ8_0* blocks = static_cast<const BlockQ8_0*>(row);
  for (int64_t b = 0; b < n_blocks; ++b) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + 32 * b),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs)));
    set_block_scales(out, b, half_to_float(blocks[b].d), 0.0f);
  }
}

// Q4_K / Q5_K: 8 six-bit scales and mins packed in 12 bytes (see quant_rows.h), each covering
// 32 values = 2 groups of 16.
template <bool kFiveBit>
void unpack_q45_k(const void* row, int64_t n_blocks, const UnpackedRow& out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m256i pairs_lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256i pairs_hi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* qs;
    const uint8_t* qh = nullptr;
    const uint8_t* packed;
    float d, dmin;
    if constexpr (kFiveBit) {
      const BlockQ5_K& blk = static_cast<const BlockQ5_K*>(row)[b];
      qs = blk.qs; qh = blk.qh; packed = blk.scales;
      d = half_to_float(blk.d); dmin = half_to_float(blk.dmin);
    } else {
      const BlockQ4_K& blk = static_cast<const BlockQ4_K*>(row)[b];
      qs = blk.qs; packed = blk.scales;
      d = half_to_float(blk.d); dmin = half_to_float(blk.dmin);
    }
    uint32_t w[3];
    std::memcpy(w, packed, 12);
    const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, m_lo = w[1] & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | (((w[0] >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | (((w[1] >> 6) & 0x03030303u) << 4);
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(
        static_cast<long long>((static_cast<uint64_t>(sc_hi) << 32) | sc_lo))));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(
        static_cast<long long>((static_cast<uint64_t>(m_hi) << 32) | m_lo))));
    const __m256 scale8 = _mm256_mul_ps(_mm256_set1_ps(d), sc);
    const __m256 min8 = _mm256_xor_ps(_mm256_set1_ps(-0.0f), _mm256_mul_ps(_mm256_set1_ps(dmin), mn));  // -(dmin * m)
    set_group_scales8(out, 16 * b, _mm256_permutevar8x32_ps(scale8, pairs_lo), _mm256_permutevar8x32_ps(min8, pairs_lo));
    set_group_scales8(out, 16 * b + 8, _mm256_permutevar8x32_ps(scale8, pairs_hi), _mm256_permutevar8x32_ps(min8, pairs_hi));
    int8_t* q = out.q + 256 * b;
    __m256i high = _mm256_setzero_si256();
    if constexpr (kFiveBit) high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
      __m256i lo = _mm256_and_si256(v, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      if constexpr (kFiveBit) {  // bit 2j of qh[l] is the fifth bit of lo[l], bit 2j + 1 of hi[l]
        const __m256i b_lo = _mm256_and_si256(_mm256_srli_epi16(high, 2 * j), one);
        const __m256i b_hi = _mm256_and_si256(_mm256_srli_epi16(high, 2 * j + 1), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b_lo, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b_hi, 4));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64 * j), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64 * j + 32), hi);
    }
  }
}

void unpack_q6_k(const void* row, int64_t n_blocks, const UnpackedRow& out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& blk = static_cast<const BlockQ6_K*>(row)[b];
    const __m256 d = _mm256_set1_ps(half_to_float(blk.d));
    for (int h = 0; h < 2; ++h) {
      const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales + 8 * h))));
      set_group_scales8(out, 16 * b + 8 * h, _mm256_mul_ps(d, sc), _mm256_setzero_ps());
    }
    for (int n = 0; n < 2; ++n) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * n));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * n + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * n));
      const __m256i v0 = _mm256_or_si256(_mm256_and_si256(a, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45));
      const __m256i v1 = _mm256_or_si256(_mm256_and_si256(c, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45));
      const __m256i v2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), _mm256_and_si256(h, bits45));
      const __m256i v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low4),
                                         _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45));
      int8_t* q = out.q + 256 * b + 128 * n;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_sub_epi8(v0, k32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32), _mm256_sub_epi8(v1, k32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64), _mm256_sub_epi8(v2, k32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 96), _mm256_sub_epi8(v3, k32));
    }
  }
}

// Q2_K / Q3_K: per 128 values n, four 2-bit planes of the same 32 bytes qs[32n..32n+31]; plane s
// (bits 2s, 2s+1) holds values 128n + 32s .. + 31 in byte order (groups 8n + 2s and 8n + 2s + 1).
inline __m256i two_bit_plane(__m256i qs, int s) {
  return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * s), _mm256_set1_epi8(3));
}

// The 8 bytes at p (unsigned, or signed when kSigned) as 8 floats.
template <bool kSigned>
inline __m256 bytes8_to_float(const void* p) {
  const __m128i v = _mm_loadl_epi64(static_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(kSigned ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
}

// Q2_K: 16 bytes of scales (low nibble: scale, high nibble: min of each group of 16), then the
// planes; w = d * sc * q - dmin * m.
void unpack_q2_k(const void* row, int64_t n_blocks, const UnpackedRow& out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& blk = static_cast<const BlockQ2_K*>(row)[b];
    const __m256 d = _mm256_set1_ps(half_to_float(blk.d)), dmin = _mm256_set1_ps(half_to_float(blk.dmin));
    alignas(16) uint8_t sc[16], mn[16];
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_and_si128(packed, _mm_set1_epi8(0x0F)));
    _mm_store_si128(reinterpret_cast<__m128i*>(mn), _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
    for (int h = 0; h < 2; ++h) {
      const __m256 min8 = _mm256_xor_ps(_mm256_set1_ps(-0.0f), _mm256_mul_ps(dmin, bytes8_to_float<false>(mn + 8 * h)));
      set_group_scales8(out, 16 * b + 8 * h, _mm256_mul_ps(d, bytes8_to_float<false>(sc + 8 * h)), min8);
    }
    for (int n = 0; n < 2; ++n) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * n));
      for (int s = 0; s < 4; ++s)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + 256 * b + 128 * n + 32 * s), two_bit_plane(qs, s));
    }
  }
}

// Q3_K: the planes, minus 4 where the value's bit in hmask (bit 4n + s of hmask[l] for plane s
// of half n) is clear; 16 six-bit signed scales (see unpack_row_scalar), w = d * (sc - 32) * q.
void unpack_q3_k(const void* row, int64_t n_blocks, const UnpackedRow& out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& blk = static_cast<const BlockQ3_K*>(row)[b];
    // scale j: low 4 bits = nibble j of bytes 0..7 (low nibbles first), top 2 bits = bits
    // 2 (j / 4), +1 of byte 8 + j % 4; minus 32
    const __m128i b07 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales));
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(b07, _mm_set1_epi8(0x0F)),
                                           _mm_and_si128(_mm_srli_epi16(b07, 4), _mm_set1_epi8(0x0F)));
    uint32_t b811;
    std::memcpy(&b811, blk.scales + 8, 4);
    const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(b811)), _mm_setr_epi32(0, 2, 4, 6)),
                                       _mm_set1_epi8(3));
    alignas(16) int8_t scales[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(scales),
                    _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32)));
    const __m256 d = _mm256_set1_ps(half_to_float(blk.d));
    for (int h = 0; h < 2; ++h)
      set_group_scales8(out, 16 * b + 8 * h, _mm256_mul_ps(d, bytes8_to_float<true>(scales + 8 * h)), _mm256_setzero_ps());
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
    for (int n = 0; n < 2; ++n) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * n));
      for (int s = 0; s < 4; ++s) {
        const __m256i bit = _mm256_and_si256(hmask, _mm256_set1_epi8(static_cast<char>(1 << (4 * n + s))));
        const __m256i minus4 = _mm256_and_si256(_mm256_cmpeq_epi8(bit, _mm256_setzero_si256()), _mm256_set1_epi8(4));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + 256 * b + 128 * n + 32 * s),
                            _mm256_sub_epi8(two_bit_plane(qs, s), minus4));
      }
    }
  }
}

// Whether some of the n_groups additive terms is non-zero (unpack_row_scalar's return value).
bool any_nonzero(const float* min16, int64_t n_groups) {
  for (int64_t g = 0; g < n_groups; ++g)
    if (min16[g] != 0.0f) return true;
  return false;
}

}  // namespace

bool try_unpack_row_avx2(DType type, const void* row, int64_t n_in, const UnpackedRow& out, bool* has_min) {
  const int64_t n32 = n_in / 32, n256 = n_in / 256;
  bool may_have_min = false;
  switch (type) {
    case DType::Q8_0: unpack_q8_0(row, n32, out); break;
    case DType::Q4_0: unpack_legacy<BlockQ4_0, false, false>(row, n32, out); break;
    case DType::Q4_1: unpack_legacy<BlockQ4_1, false, true>(row, n32, out); may_have_min = true; break;
    case DType::Q5_0: unpack_legacy<BlockQ5_0, true, false>(row, n32, out); break;
    case DType::Q5_1: unpack_legacy<BlockQ5_1, true, true>(row, n32, out); may_have_min = true; break;
    case DType::Q2_K: unpack_q2_k(row, n256, out); may_have_min = true; break;
    case DType::Q3_K: unpack_q3_k(row, n256, out); break;
    case DType::Q4_K: unpack_q45_k<false>(row, n256, out); may_have_min = true; break;
    case DType::Q5_K: unpack_q45_k<true>(row, n256, out); may_have_min = true; break;
    case DType::Q6_K: unpack_q6_k(row, n256, out); break;
    default: return false;
  }
  const int64_t n_pad = padded_values(n_in), n_groups_pad = padded_groups(n_in);
  std::memset(out.q + n_in, 0, static_cast<size_t>(n_pad - n_in));
  for (int64_t g = n_in / 16; g < n_groups_pad; ++g) out.scale16[g] = out.min16[g] = out.coef16[g] = 0.0f;
  *has_min = may_have_min && any_nonzero(out.min16, n_in / 16);
  return true;
}

}  // namespace specdec::matmul_detail
