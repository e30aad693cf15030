// kernels/repack.cpp — weight matrices repacked into a kernel's preferred layout at load time,
// and back (the layouts are described in matmul_internal.h).
//
// Why: the AVX2 Q8_0 kernel reads 8 weight rows side by side. From the file's row-major blocks
// it must transpose every block in registers (24 shuffles per 8 blocks) and gather the 8
// scales, on every call; at M = 1 that is most of its work (docs/BENCHMARKS.md section 14).
// Repacked once, the same bytes are read with 9 aligned loads per 8 blocks. The integer sums
// and the float steps are unchanged, so the outputs are bit for bit the in-place ones.
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

bool has_q8_tiles(const WeightMatrix& w) {
  return w.layout == WeightLayout::RowMajor && w.type == DType::Q8_0 && active_isa() == Isa::Avx2 && w.n_in > 0 &&
         w.n_in % 32 == 0 && w.n_out > 0;
}

// Byte offsets, inside a Q8_0Tiles8 tile, of block b's scale of lane L and its q[4k..4k+3].
int64_t q8_scale_offset(int64_t b, int L) { return (b / 2) * kQ8PairBytes + (b % 2) * 16 + 2 * L; }
int64_t q8_values_offset(int64_t b, int k, int L) { return (b / 2) * kQ8PairBytes + 32 + (b % 2) * 256 + 32 * k + 4 * L; }

}  // namespace

size_t repacked_bytes(const WeightMatrix& w) {
  if (!has_q8_tiles(w)) return 0;
  const int64_t n_tiles = (w.n_out + kRepackTileRows - 1) / kRepackTileRows;
  return static_cast<size_t>(n_tiles * q8_tile_bytes(w.n_in));
}

WeightMatrix repack_rows(const WeightMatrix& w, int64_t o_begin, int64_t o_end, void* dst) {
  if (!has_q8_tiles(w)) {
    throw Error(std::string("repack: no repacked layout for ") + dtype_name(w.type) + " weights on the " +
                isa_name(active_isa()) + " path");
  }
  if (o_begin < 0 || o_begin % kRepackTileRows != 0 || o_end < o_begin || o_end > w.n_out ||
      (o_end % kRepackTileRows != 0 && o_end != w.n_out)) {
    throw Error("repack: row range [" + std::to_string(o_begin) + ", " + std::to_string(o_end) + ") of " +
                std::to_string(w.n_out) + " rows is not a range of whole 8-row tiles");
  }
  const int64_t n_blocks = w.n_in / 32, tile_bytes = q8_tile_bytes(w.n_in);
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * static_cast<int64_t>(w.row_bytes);
    uint8_t* tile = out + (o / kRepackTileRows) * tile_bytes;
    const int L = static_cast<int>(o % kRepackTileRows);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = row + b * kQ8BlockBytes;
      std::memcpy(tile + q8_scale_offset(b, L), block, 2);
      for (int k = 0; k < 8; ++k) std::memcpy(tile + q8_values_offset(b, k, L), block + 2 + 4 * k, 4);
    }
  }
  WeightMatrix view = w;
  view.data = dst;
  view.layout = WeightLayout::Q8_0Tiles8;
  return view;
}

void copy_weight_row(const WeightMatrix& w, int64_t o, void* dst) {
  if (o < 0 || o >= w.n_out) throw Error("weight row " + std::to_string(o) + " outside [0, " + std::to_string(w.n_out) + ")");
  if (w.layout == WeightLayout::RowMajor) {
    std::memcpy(dst, static_cast<const uint8_t*>(w.data) + o * static_cast<int64_t>(w.row_bytes), w.row_bytes);
    return;
  }
  const uint8_t* tile = static_cast<const uint8_t*>(w.data) + (o / kRepackTileRows) * q8_tile_bytes(w.n_in);
  const int L = static_cast<int>(o % kRepackTileRows);
  uint8_t* row = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < w.n_in / 32; ++b) {
    uint8_t* block = row + b * kQ8BlockBytes;
    std::memcpy(block, tile + q8_scale_offset(b, L), 2);
    for (int k = 0; k < 8; ++k) std::memcpy(block + 2 + 4 * k, tile + q8_values_offset(b, k, L), 4);
  }
}

}  // namespace specdec
