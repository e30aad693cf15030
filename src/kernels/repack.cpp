// kernels/repack.cpp — weight matrices repacked into a kernel's preferred layout at load time,
// and back (the layouts are described in matmul_internal.h).
//
// Why: the AVX2 tiles read 8 weight rows side by side. From the file's row-major blocks they
// transpose every block in registers (Q8_0: 24 shuffles per 8 blocks, plus a gather of the 8
// scales) on every call; at M = 1 that is much of their work (docs/BENCHMARKS.md section 14).
// Repacked once, the same bytes are read with aligned loads. The integer sums and the float
// steps are unchanged, so the outputs are bit for bit the in-place ones. The AVX-512 tiles read
// 16 rows: their Tiles16 layouts interleave two 8-row tiles so that a tile is one stream.
// Float matrices (FloatRows8) interleave 8 rows by chunks of 16 values for the same reason: a
// decode tile then reads one stream, not 8, and needs no software prefetch.
#include <cstring>
#include <string>

#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_rows.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"

namespace specdec {

using namespace matmul_detail;

namespace {

constexpr int64_t kQ8BlockBytes = 34;  // binary16 d, 32 int8 q

// The layout w (RowMajor) gets on the active ISA; RowMajor when none.
WeightLayout target_layout(const WeightMatrix& w) {
  if (w.layout != WeightLayout::RowMajor || active_isa() == Isa::Scalar || w.n_in <= 0 || w.n_out <= 0) return WeightLayout::RowMajor;
  const bool wide = active_isa() == Isa::Avx512;
  switch (w.type) {
    case DType::Q8_0:
      if (w.n_in % 32 != 0) return WeightLayout::RowMajor;
      return wide ? WeightLayout::Q8_0Tiles16 : WeightLayout::Q8_0Tiles8;
    case DType::Q6_K:
      if (w.n_in % 256 != 0) return WeightLayout::RowMajor;
      return wide ? WeightLayout::Q6KTiles16 : WeightLayout::Q6KTiles8;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
      if (w.n_in % 256 != 0) return WeightLayout::RowMajor;
      return wide ? WeightLayout::Chunks16Tiles16 : WeightLayout::Chunks16Tiles8;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
      if (w.n_in % 64 != 0) return WeightLayout::RowMajor;
      return wide ? WeightLayout::Blocks32PairTiles16 : WeightLayout::Blocks32PairTiles8;
    case DType::F32:
    case DType::F16:
    case DType::BF16:  // both SIMD paths: one stream per decode tile (BENCHMARKS 35)
      return w.n_in % kFloatChunkValues == 0 ? WeightLayout::FloatRows8 : WeightLayout::RowMajor;
    default: return WeightLayout::RowMajor;
  }
}

// Byte offsets, inside a Q8_0Tiles8 tile, of block b's scale of lane L and its q[4k..4k+3].
int64_t q8_scale_offset(int64_t b, int L) { return (b / 2) * kQ8PairBytes + (b % 2) * 16 + 2 * L; }
int64_t q8_values_offset(int64_t b, int k, int L) { return (b / 2) * kQ8PairBytes + 32 + (b % 2) * 256 + 32 * k + 4 * L; }

// Super-block bytes of a Chunks16Tiles8 type.
int64_t super_block_bytes(DType type) { return static_cast<int64_t>(dtype_row_bytes(type, 256)); }

bool is_q8_0(WeightLayout layout) { return layout == WeightLayout::Q8_0Tiles8 || layout == WeightLayout::Q8_0Tiles16; }
bool is_q6k(WeightLayout layout) { return layout == WeightLayout::Q6KTiles8 || layout == WeightLayout::Q6KTiles16; }
bool is_legacy_pairs(WeightLayout layout) {
  return layout == WeightLayout::Blocks32PairTiles8 || layout == WeightLayout::Blocks32PairTiles16;
}

// 8-row tiles per stored tile: 2 in the Tiles16 layouts, whose 8-row tiles alternate unit by unit.
int64_t tiles_per_group(WeightLayout layout) { return is_tiles16(layout) ? 2 : 1; }

// Bytes of one unit of an 8-row tile (a pair of blocks, a super-block): the layouts' step.
int64_t unit_bytes(const WeightMatrix& w, WeightLayout layout) {
  if (is_q8_0(layout)) return kQ8PairBytes;
  if (is_q6k(layout)) return kQ6kUnitBytes;
  if (layout == WeightLayout::FloatRows8) return kFloatGroupRows * float_chunk_bytes(w);
  if (is_legacy_pairs(layout)) return legacy_pair_bytes(static_cast<int64_t>(dtype_row_bytes(w.type, 32)));
  return chunk16_block_bytes(super_block_bytes(w.type));
}

// Bytes of one 8-row tile.
int64_t tile_bytes(const WeightMatrix& w, WeightLayout layout) {
  if (is_q8_0(layout)) return q8_tile_bytes(w.n_in);
  if (is_q6k(layout)) return w.n_in / 256 * kQ6kUnitBytes;
  if (layout == WeightLayout::FloatRows8) return kFloatGroupRows * static_cast<int64_t>(w.row_bytes);
  if (is_legacy_pairs(layout)) return legacy_tile_bytes(w.n_in, static_cast<int64_t>(dtype_row_bytes(w.type, 32)));
  return w.n_in / 256 * chunk16_block_bytes(super_block_bytes(w.type));
}

// The granule (the bytes of 8 rows that make half of one 16-row load: 32 in a vector of
// transposed values, 16 in a row of binary16-sized units) at offset x of a Tiles8 unit, and
// where its region of such granules starts.
struct Granule {
  int64_t region = 0, bytes = 32;
};
Granule granule(const WeightMatrix& w, WeightLayout layout, int64_t x) {
  if (is_q8_0(layout)) return x < 32 ? Granule{0, 16} : Granule{32, 32};  // the d of 2 blocks, then q
  if (is_legacy_pairs(layout)) return x < 256 ? Granule{0, 32} : Granule{256, 16};  // qs, then units
  if (is_q6k(layout)) {  // the vectors, a group's 8 scales, then d and the padding
    if (x < kQ6kScalesOffset) return Granule{0, 32};
    return x < kQ6kDOffset ? Granule{kQ6kScalesOffset, 8} : Granule{kQ6kDOffset, 16};
  }
  const int64_t vectors = super_block_bytes(w.type) / 16 * 128;  // the chunks, then the tail's units
  return x < vectors ? Granule{0, 32} : Granule{vectors, 16};
}

// Where row o's 8-row tile lies, and where offset `to` of that tile (as for_each_piece gives
// it) goes. Tiles8: at `to`. Tiles16: the group of two 8-row tiles (rows 0-7: sub 0, 8-15: sub
// 1) keeps each unit's granules side by side: unit p at 2 p U, the granule at unit offset x
// (in a region starting at r, of granules of g bytes) at 2 x - (x - r) % g + sub g, so that the
// 16 rows' granules make one 64-byte vector (or 32 bytes of binary16).
struct TilePlace {
  const WeightMatrix* w = nullptr;
  WeightLayout layout = WeightLayout::RowMajor;
  int64_t group_start = 0, group = 1, sub = 0, unit = 1;
  int64_t at(int64_t to) const {
    if (group == 1) return group_start + to;
    const int64_t x = to % unit;
    const Granule g = granule(*w, layout, x);
    return group_start + (to / unit) * 2 * unit + 2 * x - (x - g.region) % g.bytes + sub * g.bytes;
  }
};
TilePlace tile_place(const WeightMatrix& w, WeightLayout layout, int64_t o) {
  TilePlace p;
  p.w = &w;
  p.layout = layout;
  p.group = tiles_per_group(layout);
  p.unit = unit_bytes(w, layout);
  const int64_t tile = o / kRepackTileRows;
  p.group_start = (tile / p.group) * p.group * tile_bytes(w, layout);
  p.sub = tile % p.group;
  return p;
}

// Calls copy(row_offset, tile_offset, n_bytes) for every piece of row L (of its tile) in `layout`:
// the pieces cover the row's bytes exactly once.
template <typename Copy>
void for_each_piece(const WeightMatrix& w, WeightLayout layout, int L, Copy copy) {
  if (layout == WeightLayout::FloatRows8) {  // chunk c of row L at (8 c + L) chunk bytes
    static_assert(kFloatGroupRows == kRepackTileRows);
    const int64_t chunk = float_chunk_bytes(w);
    for (int64_t c = 0; c < w.n_in / kFloatChunkValues; ++c) copy(c * chunk, (kFloatGroupRows * c + L) * chunk, static_cast<size_t>(chunk));
    return;
  }
  if (is_q8_0(layout)) {
    for (int64_t b = 0; b < w.n_in / 32; ++b) {
      copy(b * kQ8BlockBytes, q8_scale_offset(b, L), 2);
      for (int k = 0; k < 8; ++k) copy(b * kQ8BlockBytes + 2 + 4 * k, q8_values_offset(b, k, L), 4);
    }
    return;
  }
  if (is_legacy_pairs(layout)) {
    // LegacyFields' kBytes, kQsOffset (d[, m][, qh] come first) and kUnits, for the runtime type
    const int64_t block = static_cast<int64_t>(dtype_row_bytes(w.type, 32)), qs = block - 16, n_units = qs / 2;
    for (int64_t b = 0; b < w.n_in / 32; ++b) {
      const int64_t pair = (b / 2) * legacy_pair_bytes(block), e = b % 2;
      for (int k = 0; k < 4; ++k) copy(b * block + qs + 4 * k, pair + 128 * e + 32 * k + 4 * L, 4);
      for (int64_t u = 0; u < n_units; ++u) copy(b * block + 2 * u, pair + 256 + 16 * (e * n_units + u) + 2 * L, 2);
    }
    return;
  }
  const int64_t block = super_block_bytes(w.type), stride = chunk16_block_bytes(block), n_chunks = block / 16;
  for (int64_t s = 0; s < w.n_in / 256; ++s) {
    for (int64_t c = 0; c < n_chunks; ++c)
      for (int k = 0; k < 4; ++k) copy(s * block + 16 * c + 4 * k, s * stride + 128 * c + 32 * k + 4 * L, 4);
    for (int64_t u = 0; 16 * n_chunks + 2 * u < block; ++u)
      copy(s * block + 16 * n_chunks + 2 * u, s * stride + 128 * n_chunks + 16 * u + 2 * L, 2);
  }
}

// ---- Q6KTiles8 and Q6KTiles16 (matmul_internal.h): the values re-encoded, so not a
// for_each_piece permutation. A Q6_K super-block: ql[128], qh[64], scales[16], d
// (quant_blocks.h); its levels through quant_q6k.cpp's unpack / pack. Row L's super-block is
// encoded into (decoded from) its bytes of a Q6KTiles8 unit, which TilePlace puts in place.
constexpr int64_t kQ6kBlockBytes = sizeof(quant::BlockQ6_K);  // 210

// Byte e of lane L of vector k (< 3) of group base (= 32 j + 16 h) in a unit: bits 0-5 value
// base + 4 k + e, bits 6-7 bits 2 k, 2 k + 1 of value base + 12 + e.
int64_t q6k_byte_offset(int64_t base, int k, int L, int e) { return 6 * base + 32 * k + 4 * L + e; }

// Row L's super-block `block` (file bytes) into its tile unit.
void q6k_encode(const uint8_t* block, int L, uint8_t* unit) {
  quant::BlockQ6_K file;
  std::memcpy(&file, block, sizeof(file));
  uint8_t u[256];  // (256) the levels q + 32
  quant::q6_k_unpack_levels(file, u);
  for (int64_t base = 0; base < 256; base += 16)
    for (int k = 0; k < 3; ++k)
      for (int e = 0; e < 4; ++e)
        unit[q6k_byte_offset(base, k, L, e)] =
            static_cast<uint8_t>(u[base + 4 * k + e] | (((u[base + 12 + e] >> (2 * k)) & 3) << 6));
  for (int g = 0; g < 16; ++g) unit[kQ6kScalesOffset + 8 * g + L] = static_cast<uint8_t>(file.scales[g]);
  std::memcpy(unit + kQ6kDOffset + 2 * L, &file.d, 2);
}

// Calls piece(unit_offset, n_bytes) for each of row L's pieces of a Q6KTiles8 unit (the
// bytes q6k_encode writes): its lanes of the 48 vectors, its 16 scales and its d. The
// padding stays as repack_rows' zeroed buffer has it.
template <typename Piece>
void for_each_q6k_piece(int L, Piece piece) {
  for (int64_t x = 4 * L; x < kQ6kScalesOffset; x += 32) piece(x, 4);
  for (int64_t g = 0; g < 16; ++g) piece(kQ6kScalesOffset + 8 * g + L, 1);
  piece(kQ6kDOffset + 2 * L, 2);
}

// The inverse: row L's super-block (file bytes) from its tile unit.
void q6k_decode(const uint8_t* unit, int L, uint8_t* block) {
  uint8_t u[256];
  for (int64_t base = 0; base < 256; base += 16) {
    u[base + 12] = u[base + 13] = u[base + 14] = u[base + 15] = 0;
    for (int k = 0; k < 3; ++k)
      for (int e = 0; e < 4; ++e) {
        const uint8_t byte = unit[q6k_byte_offset(base, k, L, e)];
        u[base + 4 * k + e] = byte & 0x3F;
        u[base + 12 + e] = static_cast<uint8_t>(u[base + 12 + e] | ((byte >> 6) << (2 * k)));
      }
  }
  quant::BlockQ6_K file;
  quant::q6_k_pack_levels(u, file);
  for (int g = 0; g < 16; ++g) file.scales[g] = static_cast<int8_t>(unit[kQ6kScalesOffset + 8 * g + L]);
  std::memcpy(&file.d, unit + kQ6kDOffset + 2 * L, 2);
  std::memcpy(block, &file, sizeof(file));
}

}  // namespace

size_t repacked_bytes(const WeightMatrix& w) {
  const WeightLayout layout = target_layout(w);
  if (layout == WeightLayout::RowMajor) return 0;
  const int64_t group_rows = kRepackTileRows * tiles_per_group(layout);
  const int64_t n_groups = (w.n_out + group_rows - 1) / group_rows;
  return static_cast<size_t>(n_groups * tiles_per_group(layout) * tile_bytes(w, layout));
}

size_t repacked_offset(const WeightMatrix& w, int64_t o) {
  const WeightLayout layout = target_layout(w);
  if (layout == WeightLayout::RowMajor) {
    throw Error(std::string("repack: no repacked layout for ") + dtype_name(w.type) + " weights on the " +
                isa_name(active_isa()) + " path");
  }
  if (o == w.n_out) return repacked_bytes(w);
  if (o < 0 || o > w.n_out || o % 16 != 0) {
    throw Error("repack: row " + std::to_string(o) + " of " + std::to_string(w.n_out) +
                " rows is neither a multiple of 16 nor the end");
  }
  return static_cast<size_t>(o / kRepackTileRows * tile_bytes(w, layout));
}

WeightMatrix repack_rows(const WeightMatrix& w, int64_t o_begin, int64_t o_end, void* dst) {
  const WeightLayout layout = target_layout(w);
  if (layout == WeightLayout::RowMajor) {
    throw Error(std::string("repack: no repacked layout for ") + dtype_name(w.type) + " weights on the " +
                isa_name(active_isa()) + " path");
  }
  if (o_begin < 0 || o_begin % kRepackTileRows != 0 || o_end < o_begin || o_end > w.n_out ||
      (o_end % kRepackTileRows != 0 && o_end != w.n_out)) {
    throw Error("repack: row range [" + std::to_string(o_begin) + ", " + std::to_string(o_end) + ") of " +
                std::to_string(w.n_out) + " rows is not a range of whole 8-row tiles");
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * static_cast<int64_t>(w.row_bytes);
    const TilePlace place = tile_place(w, layout, o);
    if (is_q6k(layout)) {
      const int L = static_cast<int>(o % kRepackTileRows);
      uint8_t unit[kQ6kUnitBytes];  // row L's bytes of one Q6KTiles8 unit
      for (int64_t s = 0; s < w.n_in / 256; ++s) {
        q6k_encode(row + s * kQ6kBlockBytes, L, unit);
        for_each_q6k_piece(L, [&](int64_t x, size_t n) { std::memcpy(out + place.at(s * kQ6kUnitBytes + x), unit + x, n); });
      }
      continue;
    }
    for_each_piece(w, layout, static_cast<int>(o % kRepackTileRows),
                   [&](int64_t from, int64_t to, size_t n) { std::memcpy(out + place.at(to), row + from, n); });
  }
  WeightMatrix view = w;
  view.data = dst;
  view.layout = layout;
  return view;
}

void copy_weight_row(const WeightMatrix& w, int64_t o, void* dst) {
  if (o < 0 || o >= w.n_out) throw Error("weight row " + std::to_string(o) + " outside [0, " + std::to_string(w.n_out) + ")");
  if (w.layout == WeightLayout::RowMajor) {
    std::memcpy(dst, static_cast<const uint8_t*>(w.data) + o * static_cast<int64_t>(w.row_bytes), w.row_bytes);
    return;
  }
  const uint8_t* in = static_cast<const uint8_t*>(w.data);
  const TilePlace place = tile_place(w, w.layout, o);
  uint8_t* row = static_cast<uint8_t*>(dst);
  if (is_q6k(w.layout)) {
    const int L = static_cast<int>(o % kRepackTileRows);
    uint8_t unit[kQ6kUnitBytes] = {};  // row L's bytes of one Q6KTiles8 unit
    for (int64_t s = 0; s < w.n_in / 256; ++s) {
      for_each_q6k_piece(L, [&](int64_t x, size_t n) { std::memcpy(unit + x, in + place.at(s * kQ6kUnitBytes + x), n); });
      q6k_decode(unit, L, row + s * kQ6kBlockBytes);
    }
    return;
  }
  for_each_piece(w, w.layout, static_cast<int>(o % kRepackTileRows),
                 [&](int64_t from, int64_t to, size_t n) { std::memcpy(row + from, in + place.at(to), n); });
}

}  // namespace specdec
