// kernels/repack.cpp — weight matrices repacked into a kernel's preferred layout at load time,
// and back (the layouts are described in matmul_internal.h).
//
// Why: the AVX2 tiles read 8 weight rows side by side. From the file's row-major blocks they
// transpose every block in registers (Q8_0: 24 shuffles per 8 blocks, plus a gather of the 8
// scales) on every call; at M = 1 that is much of their work (docs/BENCHMARKS.md section 14).
// Repacked once, the same bytes are read with aligned loads. The integer sums and the float
// steps are unchanged, so the outputs are bit for bit the in-place ones.
#include <cstring>
#include <string>

#include "kernels/matmul_internal.h"
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
  switch (w.type) {
    case DType::Q8_0: return w.n_in % 32 == 0 ? WeightLayout::Q8_0Tiles8 : WeightLayout::RowMajor;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return w.n_in % 256 == 0 ? WeightLayout::Chunks16Tiles8 : WeightLayout::RowMajor;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:  // AVX-512 only: on AVX2 the layout made M = 9 slower (BENCHMARKS 21a)
      return w.n_in % 64 == 0 && active_isa() == Isa::Avx512 ? WeightLayout::Blocks32PairTiles8 : WeightLayout::RowMajor;
    default: return WeightLayout::RowMajor;
  }
}

// Byte offsets, inside a Q8_0Tiles8 tile, of block b's scale of lane L and its q[4k..4k+3].
int64_t q8_scale_offset(int64_t b, int L) { return (b / 2) * kQ8PairBytes + (b % 2) * 16 + 2 * L; }
int64_t q8_values_offset(int64_t b, int k, int L) { return (b / 2) * kQ8PairBytes + 32 + (b % 2) * 256 + 32 * k + 4 * L; }

// Super-block bytes of a Chunks16Tiles8 type.
int64_t super_block_bytes(DType type) { return static_cast<int64_t>(dtype_row_bytes(type, 256)); }

int64_t tile_bytes(const WeightMatrix& w, WeightLayout layout) {
  if (layout == WeightLayout::Q8_0Tiles8) return q8_tile_bytes(w.n_in);
  if (layout == WeightLayout::Blocks32PairTiles8) return legacy_tile_bytes(w.n_in, static_cast<int64_t>(dtype_row_bytes(w.type, 32)));
  return w.n_in / 256 * chunk16_block_bytes(super_block_bytes(w.type));
}

// Calls copy(row_offset, tile_offset, n_bytes) for every piece of row L (of its tile) in `layout`:
// the pieces cover the row's bytes exactly once.
template <typename Copy>
void for_each_piece(const WeightMatrix& w, WeightLayout layout, int L, Copy copy) {
  if (layout == WeightLayout::Q8_0Tiles8) {
    for (int64_t b = 0; b < w.n_in / 32; ++b) {
      copy(b * kQ8BlockBytes, q8_scale_offset(b, L), 2);
      for (int k = 0; k < 8; ++k) copy(b * kQ8BlockBytes + 2 + 4 * k, q8_values_offset(b, k, L), 4);
    }
    return;
  }
  if (layout == WeightLayout::Blocks32PairTiles8) {
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

}  // namespace

size_t repacked_bytes(const WeightMatrix& w) {
  const WeightLayout layout = target_layout(w);
  if (layout == WeightLayout::RowMajor) return 0;
  const int64_t n_tiles = (w.n_out + kRepackTileRows - 1) / kRepackTileRows;
  return static_cast<size_t>(n_tiles * tile_bytes(w, layout));
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
  const int64_t n_tile_bytes = tile_bytes(w, layout);
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * static_cast<int64_t>(w.row_bytes);
    uint8_t* tile = out + (o / kRepackTileRows) * n_tile_bytes;
    for_each_piece(w, layout, static_cast<int>(o % kRepackTileRows),
                   [&](int64_t from, int64_t to, size_t n) { std::memcpy(tile + to, row + from, n); });
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
  const uint8_t* tile = static_cast<const uint8_t*>(w.data) + (o / kRepackTileRows) * tile_bytes(w, w.layout);
  uint8_t* row = static_cast<uint8_t*>(dst);
  for_each_piece(w, w.layout, static_cast<int>(o % kRepackTileRows),
                 [&](int64_t from, int64_t to, size_t n) { std::memcpy(row + from, tile + to, n); });
}

}  // namespace specdec
