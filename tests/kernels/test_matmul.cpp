// matmul against matmul_reference for every weight type and every ISA this CPU supports, on
// fresh random data (seed printed; SPECDEC_TEST_SEED repeats a run), and batch invariance:
// a row's output is bit-identical for every M (1..32 and a 70-row batch), every position in
// the batch and every thread count.
//
// Error bounds (per output, |y - y_ref| <= bound):
//  - F32/F16/BF16 weights (converted exactly to f32): bound = 1.01 * (n_in + 1) * 2^-24 * sum|w x|,
//    the worst case of float summation of n_in products.
//  - quantized weights: activations are rounded to 8 bits per block of 32 (error per value at most
//    max|x_blk| / 254), so bound = 1.001 * sum_i |w_i| * max|x_blk(i)| / 254 + 2^-14 * sum|w x|
//    (the second term covers float rounding of the scales and sums, far below the first).
//  Plus a relative RMS error over all outputs, stated per type in kRmsBound.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_random_weights.h"
#include "kernels/quant_blocks.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

using namespace quant;
using namespace test_matmul;


// Relative RMS bound ||y - y_ref|| / ||y_ref|| over all outputs of a test (8-bit activations
// give about 0.3-1% on random data; float types only rounding).
double rms_bound(DType t) { return is_float(t) ? 1e-6 : 2e-2; }

// (n_rows, n_in) activations: uniform in [-1, 1] with occasional outliers up to +-8.
std::vector<float> random_activations(int n_rows, int64_t n_in, Rng& rng) {
  std::vector<float> x(static_cast<size_t>(n_rows * n_in));
  for (auto& v : x) v = uniform(rng, -1.0f, 1.0f) * (rng.below(50) == 0 ? 8.0f : 1.0f);
  return x;
}

// Restores the active ISA when the test leaves the scope.
struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

struct Problem {
  DType type;
  int64_t n_out, n_in;
  std::vector<uint8_t> data;       // (n_out, row_bytes)
  std::vector<float> deq;          // (n_out, n_in) dequantized weights
  WeightMatrix w;
};

Problem make_problem(DType type, int64_t n_out, int64_t n_in, Rng& rng) {
  Problem p{type, n_out, n_in, random_weights(type, n_out, n_in, rng), {}, {}};
  const size_t row_bytes = dtype_row_bytes(type, n_in);
  p.w = WeightMatrix{type, p.data.data(), n_in, n_out, row_bytes};
  p.deq.resize(static_cast<size_t>(n_out * n_in));
  for (int64_t o = 0; o < n_out; ++o)
    dequantize_row(type, p.data.data() + o * row_bytes, p.deq.data() + o * n_in, n_in);
  return p;
}

// Checks y (n_rows, n_out) for activations x against the reference and the bound of the header.
// Accumulates squared errors for the RMS check.
void check_rows(const Problem& p, const float* x, int n_rows, const float* y, const float* y_ref,
                double* err2, double* ref2, const std::string& what) {
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + r * p.n_in;
    std::vector<float> blk_max(static_cast<size_t>(p.n_in));  // (n_in) max|x| of each value's 32-block
    for (int64_t b = 0; b < p.n_in; b += 32) {
      float m = 0.0f;
      for (int64_t i = b; i < std::min(p.n_in, b + 32); ++i) m = std::max(m, std::fabs(xr[i]));
      for (int64_t i = b; i < std::min(p.n_in, b + 32); ++i) blk_max[i] = m;
    }
    for (int64_t o = 0; o < p.n_out; ++o) {
      const float* wr = p.deq.data() + o * p.n_in;
      double abs_sum = 0.0, act_err = 0.0;
      for (int64_t i = 0; i < p.n_in; ++i) {
        abs_sum += std::fabs(static_cast<double>(wr[i]) * xr[i]);
        act_err += std::fabs(static_cast<double>(wr[i])) * blk_max[i] / 254.0;
      }
      const double bound = is_float(p.type) ? 1.01 * static_cast<double>(p.n_in + 1) * std::ldexp(1.0, -24) * abs_sum
                                            : 1.001 * act_err + std::ldexp(1.0, -14) * abs_sum;
      const double got = y[r * p.n_out + o], want = y_ref[r * p.n_out + o];
      ASSERT_LE(std::fabs(got - want), bound + 1e-30)
          << what << " row " << r << " output " << o << ": got " << got << " want " << want;
      *err2 += (got - want) * (got - want);
      *ref2 += want * want;
    }
  }
}

class MatmulTypes : public ::testing::TestWithParam<DType> {};

// Every M in 1..32 (and 70, past one row block) at a random offset of a 70-row pool of
// activations: each output within the bound of the reference, and each row bit-identical to
// the same row computed alone (M = 1).
TEST_P(MatmulTypes, MatchesReferenceAndIsBatchInvariant) {
  const DType type = GetParam();
  Rng rng(testing::test_seed((std::string("matmul ") + dtype_name(type)).c_str()));
  const int64_t block = dtype_info(type).block_size;
  // Odd n_out; n_in the smallest multiple of the block size and larger (odd for float types).
  std::vector<int64_t> n_ins = block == 1 ? std::vector<int64_t>{1, 7, 16, 33, 129, 515}
                                          : std::vector<int64_t>{block, 3 * block, 256 == block ? 1024 : 320};
  constexpr int kPool = 70;
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    double err2 = 0.0, ref2 = 0.0;
    for (int64_t n_in : n_ins) {
      const int64_t n_out = 2 * static_cast<int64_t>(rng.below(20)) + 13;
      const Problem p = make_problem(type, n_out, n_in, rng);
      const std::vector<float> x = random_activations(kPool, n_in, rng);  // (kPool, n_in)
      std::vector<float> y_ref(static_cast<size_t>(kPool * n_out));         // (kPool, n_out)
      matmul_reference(p.w, x.data(), kPool, y_ref.data());
      std::vector<float> y_single(static_cast<size_t>(kPool * n_out));      // (kPool, n_out) M = 1 each
      for (int r = 0; r < kPool; ++r) matmul(p.w, x.data() + r * n_in, 1, y_single.data() + r * n_out, nullptr);
      const std::string what = std::string(dtype_name(type)) + " " + isa_name(isa) + " n_in " +
                               std::to_string(n_in) + " n_out " + std::to_string(n_out);
      check_rows(p, x.data(), kPool, y_single.data(), y_ref.data(), &err2, &ref2, what + " M=1");
      if (::testing::Test::HasFatalFailure()) return;
      std::vector<float> y(static_cast<size_t>(kPool * n_out));  // (M, n_out)
      for (int M = 1; M <= kPool; M = M < 32 ? M + 1 : (M == 32 ? kPool : kPool + 1)) {
        const int off = static_cast<int>(rng.below(static_cast<uint64_t>(kPool - M + 1)));
        matmul(p.w, x.data() + off * n_in, M, y.data(), nullptr);
        for (int r = 0; r < M; ++r)
          ASSERT_EQ(0, std::memcmp(y.data() + r * n_out, y_single.data() + (off + r) * n_out,
                                   static_cast<size_t>(n_out) * sizeof(float)))
              << what << ": row " << r << " of an M=" << M << " batch differs from the same row alone";
      }
    }
    const double rel_rms = std::sqrt(err2 / ref2);
    std::printf("[matmul] %-5s %-6s relative RMS error vs reference %.3g (bound %.3g)\n", dtype_name(type),
                isa_name(isa), rel_rms, rms_bound(type));
    EXPECT_LE(rel_rms, rms_bound(type)) << dtype_name(type) << " " << isa_name(isa);
  }
}

// Threads split n_out only: results are bit-identical for 1..4 threads and equal the
// pool-less call. At M = 40 the activation rows are quantized by several tasks of the call
// (M * n_in >= 16K values) and must give the bytes of the caller's one pass.
TEST_P(MatmulTypes, ThreadCountDoesNotChangeBits) {
  const DType type = GetParam();
  Rng rng(testing::test_seed((std::string("matmul threads ") + dtype_name(type)).c_str()));
  const int64_t n_in = dtype_info(type).block_size == 256 ? 512 : 480;
  const int64_t n_out = 301;
  const Problem p = make_problem(type, n_out, n_in, rng);
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (int M : {1, 5, 9, 40}) {
      const std::vector<float> x = random_activations(M, n_in, rng);
      std::vector<float> y0(static_cast<size_t>(M * n_out)), y(static_cast<size_t>(M * n_out));  // (M, n_out)
      matmul(p.w, x.data(), M, y0.data(), nullptr);
      for (int n_threads = 1; n_threads <= 4; ++n_threads) {
        ThreadPool pool(n_threads);
        matmul(p.w, x.data(), M, y.data(), &pool);
        ASSERT_EQ(0, std::memcmp(y.data(), y0.data(), y.size() * sizeof(float)))
            << dtype_name(type) << " " << isa_name(isa) << " M=" << M << " threads=" << n_threads;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatmulTypes, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

// Prefill-sized batches of float weights, which the AVX-512 path computes in blocks of
// kFloatBlockWeights outputs x kFloatBlockValues inputs (matmul_internal.h) from
// float_blocked_min_rows(isa) rows on: every row bit-identical to the same row alone, for an input
// length of one block, more than one (a partial last block; exactly three), partial output
// blocks and weight groups (67 = 64 + 3 outputs), 1 and 2 threads. On other ISAs the same
// check covers their unblocked tiles at these sizes.
TEST(Matmul, FloatWeightsGiveEachRowsBitsAtPrefillSizes) {
  Rng rng(testing::test_seed("matmul float prefill"));
  using Shape = std::array<int64_t, 2>;  // {n_out, n_in}
  const std::vector<Shape> shapes = {{67, 1040}, {131, 2080}, {5, 3072}, {200, 16}, {9, 1024}};
  ThreadPool pool(2);
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (DType type : {DType::F32, DType::F16, DType::BF16}) {
      for (const Shape& shape : shapes) {
        const int64_t n_out = shape[0], n_in = shape[1];
        const Problem p = make_problem(type, n_out, n_in, rng);
        constexpr int kPool = 100;
        const std::vector<float> x = random_activations(kPool, n_in, rng);  // (kPool, n_in)
        std::vector<float> y_single(static_cast<size_t>(kPool * n_out));     // (kPool, n_out) M = 1 each
        for (int r = 0; r < kPool; ++r) matmul(p.w, x.data() + r * n_in, 1, y_single.data() + r * n_out, nullptr);
        std::vector<float> y(static_cast<size_t>(kPool * n_out));  // (M, n_out)
        const int min_rows = matmul_detail::float_blocked_min_rows(isa);
        for (int M : {min_rows - 1, min_rows, min_rows + 1, 70, kPool}) {
          for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
            const int off = static_cast<int>(rng.below(static_cast<uint64_t>(kPool - M + 1)));
            matmul(p.w, x.data() + off * n_in, M, y.data(), threads);
            for (int r = 0; r < M; ++r)
              ASSERT_EQ(0, std::memcmp(y.data() + r * n_out, y_single.data() + (off + r) * n_out,
                                       static_cast<size_t>(n_out) * sizeof(float)))
                  << dtype_name(type) << " " << isa_name(isa) << " " << n_out << "x" << n_in << ": row " << r
                  << " of an M=" << M << " batch (" << (threads ? "2 threads" : "1 thread")
                  << ") differs from the same row alone";
          }
        }
      }
    }
  }
}

// The in-place tiles of Q8_0, Q4_K and Q6_K compute the same formulas on AVX2 (8 rows per
// tile) and AVX-512 (16 rows per tile), and AVX-512 runs every other quantized type on the
// AVX2 tiles: every quantized type gives the same bits on both paths, so a model's output does
// not depend on which of the two a machine dispatches to. The same for the AVX2 tiles' vpdpbusd
// build (Avx2Vnni: AVX-VNNI, or its EVEX encoding on an AVX-512 CPU without AVX-VNNI). Needs a
// CPU with one of the two (the repacked layouts: the Repack suite, against these in place).
TEST(Matmul, QuantizedTypesGiveTheSameBitsOnAvx2AndAvx512) {
  const std::vector<Isa> isas = supported_isas();
  std::vector<Isa> others;  // the targets compared with AVX2
  for (Isa isa : isas)
    if (isa == Isa::Avx2Vnni || isa == Isa::Avx512) others.push_back(isa);
  if (others.empty()) GTEST_SKIP() << "this CPU has neither VNNI form: nothing to compare the AVX2 tiles with";
  Rng rng(testing::test_seed("matmul tiles avx2 vs avx512"));
  IsaGuard guard;
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                     DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t n_in = 768, n_out = 45;  // n_out: 2 full AVX-512 tiles and a partial one
    const Problem p = make_problem(type, n_out, n_in, rng);
    for (int M : {1, 3, 8, 17}) {
      const std::vector<float> x = random_activations(M, n_in, rng);
      std::vector<float> y2(static_cast<size_t>(M * n_out)), y_other(static_cast<size_t>(M * n_out));  // (M, n_out)
      set_active_isa(Isa::Avx2);
      matmul(p.w, x.data(), M, y2.data(), nullptr);
      for (Isa isa : others) {
        set_active_isa(isa);
        matmul(p.w, x.data(), M, y_other.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(y2.data(), y_other.data(), y2.size() * sizeof(float)))
            << dtype_name(type) << " M=" << M << " " << isa_name(isa);
      }
    }
  }
}

// matmul_group (one parallel pass over several matrices of the same input, as a layer's
// Q/K/V and gate/up projections) gives every output the bits of its own matmul: mixed quantized
// and float types, a repacked matrix where this ISA has a layout, every ISA, pools of 1-3 threads.
TEST(Matmul, GroupGivesEachMatmulsBits) {
  Rng rng(testing::test_seed("matmul group"));
  IsaGuard guard;
  const int64_t n_in = 768;
  std::vector<Problem> problems;
  for (auto [type, n_out] : {std::pair{DType::Q8_0, 45}, {DType::Q4_K, 100}, {DType::F16, 33}, {DType::Q5_0, 64},
                            {DType::Q6_K, 24}})
    problems.push_back(make_problem(type, n_out, n_in, rng));
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    std::vector<WeightMatrix> matrices;
    std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>> repacked;
    for (const Problem& p : problems) {
      WeightMatrix w = p.w;
      if (const size_t n_bytes = repacked_bytes(w); n_bytes > 0) {
        repacked.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(64, (n_bytes + 63) / 64 * 64)), &std::free);
        std::memset(repacked.back().get(), 0, n_bytes);
        w = repack_rows(p.w, 0, p.n_out, repacked.back().get());
      }
      matrices.push_back(w);
    }
    for (int n_threads : {1, 2, 3}) {
      ThreadPool pool(n_threads);
      for (int M : {1, 4, 9}) {
        const std::vector<float> x = random_activations(M, n_in, rng);
        std::vector<std::vector<float>> alone, grouped;
        std::vector<MatmulOutput> outputs;
        for (const WeightMatrix& w : matrices) {
          alone.emplace_back(static_cast<size_t>(M * w.n_out));    // (M, n_out)
          grouped.emplace_back(static_cast<size_t>(M * w.n_out), -1.0f);
          matmul(w, x.data(), M, alone.back().data(), &pool);
        }
        for (size_t i = 0; i < matrices.size(); ++i) outputs.push_back({&matrices[i], grouped[i].data()});
        matmul_group(outputs.data(), static_cast<int>(outputs.size()), x.data(), M, &pool);
        for (size_t i = 0; i < matrices.size(); ++i) {
          ASSERT_EQ(0, std::memcmp(alone[i].data(), grouped[i].data(), alone[i].size() * sizeof(float)))
              << isa_name(isa) << " " << dtype_name(matrices[i].type) << " M=" << M << " threads=" << n_threads;
        }
      }
    }
  }
  Problem other = make_problem(DType::Q8_0, 16, 512, rng);
  std::vector<float> x(768), y1(45), y2(16);
  const MatmulOutput mismatched[] = {{&problems[0].w, y1.data()}, {&other.w, y2.data()}};
  EXPECT_THROW(matmul_group(mismatched, 2, x.data(), 1, nullptr), Error);  // n_in 768 vs 512
  EXPECT_THROW(matmul_group(mismatched, 0, x.data(), 1, nullptr), Error);
  const std::vector<MatmulOutput> nine(9, MatmulOutput{&problems[0].w, y1.data()});
  EXPECT_THROW(matmul_group(nine.data(), 9, x.data(), 1, nullptr), Error);
}

// A prologue computes the input inside the call (a layer's norm or swiglu): every row exactly
// once, before any product reads it, and the outputs are the bits of computing x first and
// calling without one. Quantized and float matrices (the float-only group has no quantization
// to fold it into), every ISA, pools of 1-3 threads, M from 1 to 17 (so the rows are split over
// 1 to 3 row tasks, and over several product tasks).
TEST(Matmul, PrologueFillsEachRowOnceBeforeTheProducts) {
  Rng rng(testing::test_seed("matmul prologue"));
  IsaGuard guard;
  const int64_t n_in = 2048;
  std::vector<Problem> problems;
  for (auto [type, n_out] : {std::pair{DType::Q4_K, 80}, {DType::F16, 48}, {DType::Q8_0, 64}})
    problems.push_back(make_problem(type, n_out, n_in, rng));
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (int n_threads : {1, 2, 3}) {
      ThreadPool pool(n_threads);
      for (int M : {1, 2, 5, 9, 17}) {
        const std::vector<float> source = random_activations(M, n_in, rng);  // (M, n_in)
        std::vector<float> x_first(source.size());                           // (M, n_in) x computed before the call
        for (size_t i = 0; i < source.size(); ++i) x_first[i] = source[i] * 0.75f - 0.125f;
        for (const std::vector<size_t>& group : {std::vector<size_t>{0, 1, 2}, std::vector<size_t>{1}}) {
          std::vector<std::vector<float>> expected, got;
          std::vector<MatmulOutput> plain, with_prologue;
          for (size_t i : group) {
            const size_t n_y = static_cast<size_t>(M * problems[i].n_out);
            expected.emplace_back(n_y, -1.0f);  // (M, n_out)
            got.emplace_back(n_y, -2.0f);
          }
          for (size_t g = 0; g < group.size(); ++g) {
            plain.push_back({&problems[group[g]].w, expected[g].data()});
            with_prologue.push_back({&problems[group[g]].w, got[g].data()});
          }
          matmul_group(plain.data(), static_cast<int>(plain.size()), x_first.data(), M, &pool);
          std::vector<float> x(source.size(), std::numeric_limits<float>::quiet_NaN());  // filled by the prologue
          std::vector<std::atomic<int>> runs(static_cast<size_t>(M));                   // (M) times each row was computed
          const auto prologue = [&](int r0, int r1) {
            ASSERT_LE(0, r0);
            ASSERT_LT(r0, r1);
            ASSERT_LE(r1, M);
            for (int r = r0; r < r1; ++r) {
              runs[static_cast<size_t>(r)].fetch_add(1);
              for (int64_t i = 0; i < n_in; ++i) {
                const size_t at = static_cast<size_t>(r * n_in + i);
                x[at] = source[at] * 0.75f - 0.125f;
              }
            }
          };
          matmul_group(with_prologue.data(), static_cast<int>(with_prologue.size()), x.data(), M, &pool, prologue);
          for (int r = 0; r < M; ++r) ASSERT_EQ(1, runs[static_cast<size_t>(r)].load()) << "row " << r;
          for (size_t g = 0; g < group.size(); ++g) {
            ASSERT_EQ(0, std::memcmp(expected[g].data(), got[g].data(), expected[g].size() * sizeof(float)))
                << isa_name(isa) << " " << dtype_name(problems[group[g]].type) << " M=" << M
                << " threads=" << n_threads << " group of " << group.size();
          }
        }
      }
    }
  }
}

TEST(Matmul, RejectsBadArguments) {
  std::vector<uint8_t> data(34 * 4);
  float x[64] = {}, y[4] = {};
  WeightMatrix w{DType::Q8_0, data.data(), 64, 2, 68};
  EXPECT_THROW(matmul(w, x, 0, y, nullptr), Error);  // M = 0
  WeightMatrix bad_row = w;
  bad_row.row_bytes = 60;
  EXPECT_THROW(matmul(bad_row, x, 1, y, nullptr), Error);  // rows shorter than 2 blocks
  WeightMatrix partial = w;
  partial.n_in = 48;
  EXPECT_THROW(matmul(partial, x, 1, y, nullptr), Error);  // not a multiple of 32
  WeightMatrix not_weight = w;
  not_weight.type = DType::Q8_K;
  EXPECT_THROW(matmul(not_weight, x, 1, y, nullptr), Error);
  EXPECT_NO_THROW(matmul(w, x, 1, y, nullptr));
}

// Non-finite activations give non-finite outputs on every path (no UB in the 8-bit rounding).
TEST(Matmul, NonFiniteActivationsPropagate) {
  Rng rng(7);
  IsaGuard guard;
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::F16}) {
    const Problem p = make_problem(type, 3, 256, rng);
    std::vector<float> x = random_activations(1, 256, rng);
    x[100] = std::nanf("");
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      float y[3];
      matmul(p.w, x.data(), 1, y, nullptr);
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << dtype_name(type) << " " << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace specdec
