// AMX tiles (matmul_tiles_amx.cpp): on a CPU with AMX-INT8, the AVX-512 path with AMX on gives
// bit for bit the VNNI tiles' outputs (AMX off) for Q8_0, Q4_K, Q5_K and Q6_K, in place and
// repacked, for every M (1..100: row groups of 16 with partial last groups, row blocks of 64),
// odd shapes (partial last weight tiles, a short last batch of Q8_0 blocks) and thread counts;
// and matmul_group with AMX gives each matrix its own bits. Skipped, with the reason, on a CPU
// without AMX. Random data, seed printed (SPECDEC_TEST_SEED repeats a run).
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/testing.h"
#include "kernels/matmul_random_weights.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

using namespace test_matmul;

struct AmxGuard {
  Isa saved_isa = active_isa();
  AmxUse saved_amx = amx_use();
  ~AmxGuard() {
    set_active_isa(saved_isa);
    set_amx_use(saved_amx);
  }
};

// A random matrix of `type`, and (repacked = true) its copy in the AVX-512 path's layout.
struct AmxProblem {
  std::vector<uint8_t> data;  // (n_out, row_bytes)
  std::unique_ptr<uint8_t, FreeDeleter> packed;
  WeightMatrix w;
};

AmxProblem make_amx_problem(DType type, int64_t n_out, int64_t n_in, bool repacked, Rng& rng) {
  AmxProblem p;
  p.data = random_weights(type, n_out, n_in, rng);
  p.w = WeightMatrix{type, p.data.data(), n_in, n_out, dtype_row_bytes(type, n_in)};
  if (repacked) {
    const size_t n_bytes = repacked_bytes(p.w);
    EXPECT_GT(n_bytes, 0u) << dtype_name(type);
    p.packed.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (n_bytes + 63) / 64 * 64)));
    std::memset(p.packed.get(), 0, n_bytes);
    p.w = repack_rows(p.w, 0, n_out, p.packed.get());
    EXPECT_NE(p.w.layout, WeightLayout::RowMajor) << dtype_name(type);
  }
  return p;
}

std::vector<float> amx_x(int M, int64_t n_in, Rng& rng) {
  std::vector<float> x(static_cast<size_t>(M * n_in));  // (M, n_in)
  for (auto& v : x) v = uniform(rng, -1.0f, 1.0f) * (rng.below(50) == 0 ? 8.0f : 1.0f);
  return x;
}

std::vector<float> amx_run(const WeightMatrix& w, const std::vector<float>& x, int M, bool amx, ThreadPool* pool) {
  set_amx_use(amx ? AmxUse::All : AmxUse::Off);
  std::vector<float> y(static_cast<size_t>(M * w.n_out), -1.0f);  // (M, n_out)
  matmul(w, x.data(), M, y.data(), pool);
  return y;
}

TEST(MatmulAmx, SwitchingOnNeedsAmx) {
  AmxGuard guard;
  if (amx_detected()) {
    set_active_isa(Isa::Avx512);
    for (AmxUse use : {AmxUse::KQuants, AmxUse::All}) {
      set_amx_use(use);
      EXPECT_TRUE(amx_active());
      EXPECT_EQ(active_isa_label(), "avx512+amx");
    }
    set_amx_use(AmxUse::Off);
    EXPECT_FALSE(amx_active());
    EXPECT_EQ(active_isa_label(), "avx512");
  } else {
    EXPECT_EQ(amx_use(), AmxUse::Off);  // the default where there is none
    EXPECT_THROW(set_amx_use(AmxUse::KQuants), Error);
    EXPECT_THROW(set_amx_use(AmxUse::All), Error);
    EXPECT_EQ(std::string(active_isa_label()).find("amx"), std::string::npos);
  }
}

TEST(MatmulAmx, TilesGiveTheVnniBitsForEveryM) {
  if (!amx_detected()) GTEST_SKIP() << "this CPU has no AMX-INT8 (or the kernel refused the tile state): nothing to compare";
  AmxGuard guard;
  set_active_isa(Isa::Avx512);
  Rng rng(testing::test_seed("matmul amx vs vnni"));
  ThreadPool pool(3);
  // {n_out, n_in}: partial last weight tiles (45, 13 rows); Q8_0: 25 and 3 blocks of 32 (a
  // short last batch of 8); K types: 1 and 3 super-blocks.
  using Shapes = std::vector<std::array<int64_t, 2>>;
  const Shapes q8_shapes = {{45, 800}, {13, 96}, {64, 256}};
  const Shapes k_shapes = {{45, 768}, {13, 256}};
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (bool repacked : {false, true}) {
      for (const auto& shape : type == DType::Q8_0 ? q8_shapes : k_shapes) {
        const AmxProblem p = make_amx_problem(type, shape[0], shape[1], repacked, rng);
        // Below kAmxMinRows (32) the call runs on the VNNI tiles; from there, full groups of 16
        // rows and partial groups of 1-15 rows, in the first and second row blocks of 64.
        for (int M : {1, 9, 32, 33, 40, 47, 64, 65, 70, 80, 100}) {
          const std::vector<float> x = amx_x(M, shape[1], rng);
          const std::vector<float> vnni = amx_run(p.w, x, M, false, nullptr);
          for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
            const std::vector<float> y = amx_run(p.w, x, M, true, threads);
            ASSERT_EQ(0, std::memcmp(y.data(), vnni.data(), y.size() * sizeof(float)))
                << dtype_name(type) << (repacked ? " repacked " : " in place ") << shape[0] << "x" << shape[1]
                << " M=" << M << (threads ? " 3 threads" : " 1 thread");
          }
        }
      }
    }
  }
}

TEST(MatmulAmx, GroupGivesEachMatmulsBits) {
  if (!amx_detected()) GTEST_SKIP() << "this CPU has no AMX-INT8 (or the kernel refused the tile state): nothing to compare";
  AmxGuard guard;
  set_active_isa(Isa::Avx512);
  Rng rng(testing::test_seed("matmul amx group"));
  ThreadPool pool(2);
  const int64_t n_in = 512;
  std::vector<AmxProblem> problems;
  problems.push_back(make_amx_problem(DType::Q4_K, 100, n_in, true, rng));
  problems.push_back(make_amx_problem(DType::Q6_K, 24, n_in, true, rng));
  problems.push_back(make_amx_problem(DType::Q8_0, 45, n_in, true, rng));
  problems.push_back(make_amx_problem(DType::Q5_0, 33, n_in, false, rng));  // not an AMX type: the VNNI tiles
  // KQuants: in one call the Q4_K matrix on AMX, the others on the VNNI tiles; All: Q6_K and
  // Q8_0 on AMX too.
  for (AmxUse use : {AmxUse::KQuants, AmxUse::All}) {
    for (int M : {9, 40, 70}) {
      const std::vector<float> x = amx_x(M, n_in, rng);
      std::vector<std::vector<float>> grouped;
      std::vector<MatmulOutput> outputs;
      for (const AmxProblem& p : problems) grouped.emplace_back(static_cast<size_t>(M * p.w.n_out), -1.0f);
      for (size_t i = 0; i < problems.size(); ++i) outputs.push_back({&problems[i].w, grouped[i].data()});
      set_amx_use(use);
      matmul_group(outputs.data(), static_cast<int>(outputs.size()), x.data(), M, &pool);
      for (size_t i = 0; i < problems.size(); ++i) {
        const std::vector<float> vnni = amx_run(problems[i].w, x, M, false, nullptr);
        ASSERT_EQ(0, std::memcmp(vnni.data(), grouped[i].data(), vnni.size() * sizeof(float)))
            << dtype_name(problems[i].w.type) << " M=" << M << (use == AmxUse::All ? " (all types)" : " (K-quants)");
      }
    }
  }
}

}  // namespace
}  // namespace specdec
