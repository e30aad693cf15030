// Repacked weights (repack_rows: the Tiles8, Tiles16 and FloatRows8 layouts): the AVX2 and AVX-512 kernels over
// the repacked copy give bit for bit the in-place kernel's outputs for every M, odd shapes (a partial last
// tile, an odd block count), thread counts and decode and verify prefetch settings (DecodePrefetch, VerifyPrefetch); copy_weight_row restores every row; a repacked
// matrix used on another ISA falls back to row-major order with that ISA's bits; and only the
// types and ISAs that have a repacked layout are repacked. Random data, seed printed
// (SPECDEC_TEST_SEED repeats a run).
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_random_weights.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

using namespace test_matmul;

struct IsaGuard {
  Isa saved = active_isa();
  DecodePrefetch saved_prefetch = decode_prefetch();
  VerifyPrefetch saved_verify = verify_prefetch();
  ~IsaGuard() { set_active_isa(saved), set_decode_prefetch(saved_prefetch), set_verify_prefetch(saved_verify); }
};

bool supports(Isa isa) {
  for (Isa s : supported_isas()) if (s == isa) return true;
  return false;
}

// The types with a repacked layout on the active ISA: AVX2 (Tiles8) and AVX-512 (Tiles16)
// repack Q8_0, the K-quants and the legacy 32-value types (n_in a multiple of 64), both the
// float types (FloatRows8, n_in a multiple of 16).
std::vector<DType> repacked_types() {
  return {DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F32,
          DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1};
}

// The super-block types (n_in a multiple of 256).
bool is_k_quant(DType type) {
  return type == DType::Q2_K || type == DType::Q3_K || type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
}
bool is_legacy(DType type) { return type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q5_0 || type == DType::Q5_1; }

WeightLayout expected_layout(DType type) {
  const bool wide = active_isa() == Isa::Avx512;
  if (is_float(type)) return WeightLayout::FloatRows8;
  if (is_legacy(type)) return wide ? WeightLayout::Blocks32PairTiles16 : WeightLayout::Blocks32PairTiles8;
  if (type == DType::Q8_0) return wide ? WeightLayout::Q8_0Tiles16 : WeightLayout::Q8_0Tiles8;
  if (type == DType::Q6_K) return wide ? WeightLayout::Q6KTiles16 : WeightLayout::Q6KTiles8;
  return wide ? WeightLayout::Chunks16Tiles16 : WeightLayout::Chunks16Tiles8;
}

// A matrix and its repacked copy (made while the tested path is active).
struct RepackedProblem {
  std::vector<uint8_t> data;  // (n_out, row_bytes)
  WeightMatrix w;             // row-major view of data
  std::unique_ptr<uint8_t, FreeDeleter> bytes;
  WeightMatrix repacked;      // view of bytes
};

// chunk_rows: rows per repack_rows call (a multiple of kRepackTileRows), as the loader does.
RepackedProblem make_repacked(DType type, int64_t n_out, int64_t n_in, int64_t chunk_rows, Rng& rng) {
  RepackedProblem p;
  p.data = random_weights(type, n_out, n_in, rng);
  p.w = WeightMatrix{type, p.data.data(), n_in, n_out, dtype_row_bytes(type, n_in)};
  const size_t n_bytes = repacked_bytes(p.w);
  EXPECT_GT(n_bytes, 0u);
  p.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (n_bytes + 63) / 64 * 64)));
  std::memset(p.bytes.get(), 0, n_bytes);
  for (int64_t o = 0; o < n_out; o += chunk_rows) p.repacked = repack_rows(p.w, o, std::min(n_out, o + chunk_rows), p.bytes.get());
  EXPECT_EQ(p.repacked.layout, expected_layout(type));
  return p;
}

std::vector<float> random_x(int M, int64_t n_in, Rng& rng) {
  std::vector<float> x(static_cast<size_t>(M * n_in));  // (M, n_in)
  for (auto& v : x) v = uniform(rng, -1.0f, 1.0f) * (rng.below(50) == 0 ? 8.0f : 1.0f);
  return x;
}

std::vector<float> run(const WeightMatrix& w, const std::vector<float>& x, int M, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(M * w.n_out));  // (M, n_out)
  matmul(w, x.data(), M, y.data(), pool);
  return y;
}

// Tests of the repacked layouts on each SIMD path that reads them (AVX2: 8-row tiles; AVX-512:
// 16-row tiles made of two stored 8-row tiles), that path active; skipped where the CPU lacks it.
class Repack : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!supports(GetParam())) GTEST_SKIP() << "this CPU has no " << isa_name(GetParam()) << ": nothing to test there";
    set_active_isa(GetParam());
  }
  IsaGuard guard_;
};

TEST_P(Repack, TilesGiveTheInPlaceBitsForEveryM) {
  Rng rng(testing::test_seed("repacked vs in place"));
  ThreadPool pool(2);
  // {n_out, n_in}: partial last tiles (1, 13, 37 rows), odd block counts of 32 (n_in / 32 = 1,
  // 3, 9), and a shape split over several thread chunks; K types: n_in a multiple of 256. Q8_0
  // 24 x 1056: 33 blocks, which the AVX2 row groups take in chunks of 16 (two and a part). The M
  // values give the AVX2 Q8_0 tile every group size, 2 to 12, alone (M <= 12) and in chunks
  // (13 = 6 + 7, 17 = 8 + 9, 32, 70 = 64 + 6).
  using Shapes = std::vector<std::array<int64_t, 2>>;  // {n_out, n_in}
  const Shapes q8_shapes = {{1, 32}, {8, 64}, {13, 96}, {37, 288}, {64, 256}, {200, 512}, {24, 1056}};
  const Shapes k_shapes = {{1, 256}, {13, 512}, {37, 768}, {200, 256}};
  // legacy types: n_in a multiple of 64 (pairs of blocks), 576 as in 576-wide models; 24 x 1088:
  // 34 blocks, which the AVX2 row groups build in chunks of 16 (two and a part)
  const Shapes legacy_shapes = {{1, 64}, {8, 128}, {13, 576}, {37, 192}, {200, 64}, {24, 1088}};
  // float types: n_in a multiple of 16 (chunks), odd chunk counts and 2 or 3 AVX2 vectors; 67 x
  // 1040: at M = 70 the AVX-512 blocked products' partial input and output blocks
  const Shapes float_shapes = {{1, 16}, {8, 48}, {13, 80}, {37, 208}, {200, 576}, {67, 1040}};
  for (DType type : repacked_types()) {
    for (const auto& shape : is_k_quant(type) ? k_shapes : is_legacy(type) ? legacy_shapes : is_float(type) ? float_shapes : q8_shapes) {
      const RepackedProblem p = make_repacked(type, shape[0], shape[1], 16, rng);
      for (int M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 32, 70}) {
        const std::vector<float> x = random_x(M, shape[1], rng);
        const std::vector<float> in_place = run(p.w, x, M, nullptr);
        for (int setting = 0; setting < 3; ++setting) {  // hints only: the same bits
          const DecodePrefetch prefetch = setting == 0   ? DecodePrefetch::Light
                                          : setting == 1 ? DecodePrefetch::Deep
                                                         : DecodePrefetch::Burst;
          const VerifyPrefetch verify = setting == 0 ? VerifyPrefetch::Near : VerifyPrefetch::Far;
          set_decode_prefetch(prefetch);
          set_verify_prefetch(verify);
          for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
            const std::vector<float> y = run(p.repacked, x, M, threads);
            ASSERT_EQ(0, std::memcmp(y.data(), in_place.data(), y.size() * sizeof(float)))
                << dtype_name(type) << " " << shape[0] << "x" << shape[1] << " M=" << M
                << (threads ? " 2 threads" : " 1 thread") << ", decode prefetch " << decode_prefetch_name(prefetch)
                << ", verify prefetch " << verify_prefetch_name(verify);
          }
        }
      }
    }
  }
}

TEST_P(Repack, ChunkedRepackEqualsOneCallAndRowsCopyBack) {
  Rng rng(testing::test_seed("repack chunks"));
  for (DType type : repacked_types()) {
    const int64_t n_in = is_k_quant(type) ? 512 : is_legacy(type) ? 192 : 160;
    const uint64_t seed = rng.next_u64();
    Rng a(seed), b(seed);
    const RepackedProblem whole = make_repacked(type, 45, n_in, 48, a);
    const RepackedProblem chunked = make_repacked(type, 45, n_in, 8, b);
    ASSERT_EQ(0, std::memcmp(whole.bytes.get(), chunked.bytes.get(), repacked_bytes(whole.w))) << dtype_name(type);
    std::vector<uint8_t> row(whole.w.row_bytes);
    for (int64_t o = 0; o < 45; ++o) {
      copy_weight_row(whole.repacked, o, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), whole.data.data() + o * whole.w.row_bytes, row.size())) << dtype_name(type) << " row " << o;
      copy_weight_row(whole.w, o, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), whole.data.data() + o * whole.w.row_bytes, row.size())) << dtype_name(type) << " row " << o;
    }
    EXPECT_THROW(copy_weight_row(whole.repacked, 45, row.data()), Error);
    EXPECT_THROW(copy_weight_row(whole.repacked, -1, row.data()), Error);
  }
}

// Tests switch ISAs after a model is loaded: a matrix repacked for AVX2 still gives, on every
// other path, that path's row-major result (and matmul_reference its reference).
TEST_P(Repack, RepackedMatrixOnAnotherIsaGivesThatIsasBits) {
  Rng rng(testing::test_seed("repacked on other isas"));
  for (DType type : repacked_types()) {
    set_active_isa(GetParam());
    // Q8_0: 7 blocks of 32, an odd pair count; legacy types: 5 pairs of blocks; floats: 14 chunks
    const int64_t n_in = is_k_quant(type) ? 256 : is_legacy(type) ? 320 : 224;
    const RepackedProblem p = make_repacked(type, 21, n_in, 16, rng);
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      for (int M : {1, 6}) {
        const std::vector<float> x = random_x(M, n_in, rng);
        const std::vector<float> y = run(p.repacked, x, M, nullptr), y_row_major = run(p.w, x, M, nullptr);
        ASSERT_EQ(0, std::memcmp(y.data(), y_row_major.data(), y.size() * sizeof(float)))
            << dtype_name(type) << " " << isa_name(isa) << " M=" << M;
      }
    }
    const std::vector<float> x = random_x(3, n_in, rng);
    std::vector<float> ref(3 * 21), ref_row_major(3 * 21);
    matmul_reference(p.repacked, x.data(), 3, ref.data());
    matmul_reference(p.w, x.data(), 3, ref_row_major.data());
    EXPECT_EQ(0, std::memcmp(ref.data(), ref_row_major.data(), ref.size() * sizeof(float))) << dtype_name(type);
  }
}

TEST(Repack, OnlyTypesAndIsasWithALayoutAndWholeTiles) {
  IsaGuard guard;
  Rng rng(testing::test_seed("repack arguments"));
  std::vector<uint8_t> q8 = random_weights(DType::Q8_0, 16, 64, rng), q2k = random_weights(DType::Q2_K, 16, 256, rng);
  std::vector<uint8_t> q6k = random_weights(DType::Q6_K, 16, 256, rng), q51 = random_weights(DType::Q5_1, 16, 96, rng);
  const WeightMatrix w8{DType::Q8_0, q8.data(), 64, 16, dtype_row_bytes(DType::Q8_0, 64)};
  const WeightMatrix w2k{DType::Q2_K, q2k.data(), 256, 16, dtype_row_bytes(DType::Q2_K, 256)};
  const WeightMatrix w6k{DType::Q6_K, q6k.data(), 256, 16, dtype_row_bytes(DType::Q6_K, 256)};
  const WeightMatrix w51{DType::Q5_1, q51.data(), 96, 16, dtype_row_bytes(DType::Q5_1, 96)};
  const WeightMatrix w51_64{DType::Q5_1, q51.data(), 64, 16, dtype_row_bytes(DType::Q5_1, 64)};
  std::vector<uint8_t> f16 = random_weights(DType::F16, 13, 48, rng);
  const WeightMatrix wf16{DType::F16, f16.data(), 48, 13, dtype_row_bytes(DType::F16, 48)};
  const WeightMatrix wf16_40{DType::F16, f16.data(), 40, 13, dtype_row_bytes(DType::F16, 40)};  // 2.5 chunks
  std::vector<uint8_t> dst(4096);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    // Q2_K: 2 tiles x (5 chunks x 128 + the tail of d and dmin, 8 x 4 bytes)
    EXPECT_EQ(repacked_bytes(w2k), isa != Isa::Scalar ? 2u * 672u : 0u) << isa_name(isa);
    if (isa == Isa::Scalar) {
      EXPECT_THROW(repack_rows(w2k, 0, 16, dst.data()), Error);
    }
    EXPECT_THROW(repack_rows(w51, 0, 16, dst.data()), Error);  // no layout on any ISA
    // Q6_K: 2 tiles x (13 chunks x 128 + the tail of 8 binary16 d padded to 32) on AVX2
    EXPECT_EQ(repacked_bytes(w6k), isa != Isa::Scalar ? 2u * 1696u : 0u) << isa_name(isa);
    if (isa == Isa::Avx512) {  // Q6KTiles16: the 16 rows' d side by side, their scales by group
      ASSERT_EQ(repack_rows(w6k, 0, 16, dst.data()).layout, WeightLayout::Q6KTiles16);
      for (int L = 0; L < 16; ++L) {
        const uint8_t* block = q6k.data() + L * w6k.row_bytes;  // ql[128], qh[64], scales[16], d
        EXPECT_EQ(0, std::memcmp(dst.data() + 2 * matmul_detail::kQ6kDOffset + 2 * L, block + 208, 2)) << "d of row " << L;
        EXPECT_EQ(dst[2 * matmul_detail::kQ6kScalesOffset + 16 * 5 + L], block[192 + 5]) << "scale 5 of row " << L;
      }
    }
    // Q5_1, n_in = 96 (3 blocks: not whole pairs): read in place everywhere; n_in = 64 on both
    // SIMD paths: 2 tiles x 1 pair of blocks x 8 rows x 2 x 24 bytes
    EXPECT_EQ(repacked_bytes(w51), 0u) << isa_name(isa);
    EXPECT_EQ(repacked_bytes(w51_64), isa != Isa::Scalar ? 2u * 384u : 0u) << isa_name(isa);
    // F16: 2 groups of 8 rows x 96 bytes (the last 3 rows zero) on both SIMD paths; n_in not
    // a multiple of 16: read in place
    EXPECT_EQ(repacked_bytes(wf16), isa != Isa::Scalar ? 2u * 8u * 96u : 0u) << isa_name(isa);
    EXPECT_EQ(repacked_bytes(wf16_40), 0u) << isa_name(isa);
    if (isa != Isa::Scalar) {
      EXPECT_THROW(repack_rows(wf16, 0, 12, dst.data()), Error);  // ends inside a group
      const WeightMatrix v = repack_rows(wf16, 0, 13, dst.data());
      EXPECT_EQ(v.layout, WeightLayout::FloatRows8);
      EXPECT_EQ(0, std::memcmp(dst.data() + 32, f16.data() + 96, 32));  // row 1's first chunk after row 0's
      EXPECT_EQ(0, std::memcmp(dst.data() + 8 * 32, f16.data() + 32, 32));  // row 0's second chunk after the 8 rows' first
    }
    if (isa != Isa::Scalar) {
      EXPECT_EQ(repacked_bytes(w8), 2u * 544u);  // 2 tiles x 1 pair of blocks
      EXPECT_THROW(repack_rows(w8, 4, 16, dst.data()), Error);   // not a tile boundary
      EXPECT_THROW(repack_rows(w8, 0, 12, dst.data()), Error);   // ends inside a tile
      EXPECT_THROW(repack_rows(w8, 0, 17, dst.data()), Error);   // past n_out
      EXPECT_NO_THROW(repack_rows(w8, 8, 16, dst.data()));
      EXPECT_EQ(repacked_offset(w8, 0), 0u);  // the loader's chunks: rows from a multiple of 16
      EXPECT_EQ(repacked_offset(w8, 16), repacked_bytes(w8));
      EXPECT_THROW(repacked_offset(w8, 8), Error);
      EXPECT_THROW(repacked_offset(w8, 32), Error);
      WeightMatrix twice = repack_rows(w8, 0, 16, dst.data());
      EXPECT_EQ(repacked_bytes(twice), 0u);  // already repacked
    } else {
      EXPECT_EQ(repacked_bytes(w8), 0u) << isa_name(isa);
      EXPECT_THROW(repack_rows(w8, 0, 16, dst.data()), Error);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SimdPaths, Repack, ::testing::Values(Isa::Avx2, Isa::Avx2Vnni, Isa::Avx512),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace specdec
