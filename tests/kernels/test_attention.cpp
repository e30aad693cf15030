// attention() against a float64 reference on random data (every ISA this CPU supports, odd
// head sizes, grouped-query heads, token trees), and its invariances: a row's output is
// bit-identical alone or in a batch, with 1 or 2 threads, and for a tree node or its path
// stored as a chain (keys in other slots, same logical order).
//
// Error bound (per output value): |out - ref| <= 3e-6 * max|v| * (1 + head_dim / 16): float
// rounding of the scores (dot products of head_dim terms), the softmax and the weighted sum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/testing.h"
#include "kernels/attention_impl.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

using testing::uniform_signed;

struct AttentionProblem {
  AttentionShape shape;
  int n_prefix = 0;
  int n_slots = 0;
  std::vector<int> parent;       // (M) tree over the batch rows
  std::vector<int> slot;         // (M) slot of each row's own key
  std::vector<int> extra_begin;  // (M + 1)
  std::vector<int> extra_slots;
  std::vector<float> q;          // (M, n_heads * head_dim)
  std::vector<float> k, v;       // (n_slots, kv_stride)
  size_t kv_stride = 0;
  int n_rows() const { return static_cast<int>(parent.size()); }
  AttentionRows rows() const { return {n_rows(), n_prefix, extra_begin.data(), extra_slots.data()}; }
};

// Rows as a random tree (parents drawn at random), or as a chain (row i's parent is row i - 1:
// a verify's K + 1 rows, whose extras are nested, which attention reads as shared keys).
enum class RowTree { Random, Chain };

AttentionProblem random_problem(Rng& rng, int n_heads, int n_kv_heads, int head_dim, int n_prefix, int m,
                                RowTree tree = RowTree::Random) {
  AttentionProblem p;
  p.shape = {n_heads, n_kv_heads, head_dim};
  p.n_prefix = n_prefix;
  p.n_slots = n_prefix + m + 3;  // a few unused slots
  p.kv_stride = static_cast<size_t>(n_kv_heads * head_dim + 5);  // padded rows
  p.parent.resize(static_cast<size_t>(m));
  p.slot.resize(static_cast<size_t>(m));
  std::vector<int> free_slots;
  for (int s = n_prefix; s < p.n_slots; ++s) free_slots.push_back(s);
  for (int i = 0; i < m; ++i) {
    p.parent[i] = tree == RowTree::Chain ? i - 1 : static_cast<int>(rng.below(static_cast<uint64_t>(i + 1))) - 1;
    const size_t pick = rng.below(free_slots.size());
    p.slot[i] = free_slots[pick];
    free_slots.erase(free_slots.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  p.extra_begin.push_back(0);
  for (int i = 0; i < m; ++i) {
    std::vector<int> chain;
    for (int a = i; a >= 0; a = p.parent[a]) chain.insert(chain.begin(), p.slot[a]);
    p.extra_slots.insert(p.extra_slots.end(), chain.begin(), chain.end());
    p.extra_begin.push_back(static_cast<int>(p.extra_slots.size()));
  }
  p.q.resize(static_cast<size_t>(m) * n_heads * head_dim);
  p.k.resize(static_cast<size_t>(p.n_slots) * p.kv_stride);
  p.v.resize(p.k.size());
  for (float& x : p.q) x = 2.0f * uniform_signed(rng);
  for (float& x : p.k) x = uniform_signed(rng);
  for (float& x : p.v) x = uniform_signed(rng);
  return p;
}

std::vector<float> run(const AttentionProblem& p, ThreadPool* pool) {
  std::vector<float> out(p.q.size(), -7.0f);  // (M, n_heads * head_dim)
  attention(p.shape, p.rows(), p.q.data(), p.k.data(), p.v.data(), p.kv_stride, out.data(), pool);
  return out;
}

std::vector<double> reference(const AttentionProblem& p) {
  const int hd = p.shape.head_dim, group = p.shape.n_heads / p.shape.n_kv_heads;
  std::vector<double> out(p.q.size());
  for (int i = 0; i < p.n_rows(); ++i) {
    std::vector<int> visible;
    for (int s = 0; s < p.n_prefix; ++s) visible.push_back(s);
    for (int e = p.extra_begin[i]; e < p.extra_begin[i + 1]; ++e) visible.push_back(p.extra_slots[e]);
    for (int h = 0; h < p.shape.n_heads; ++h) {
      const float* q = p.q.data() + (static_cast<size_t>(i) * p.shape.n_heads + h) * hd;
      const size_t off = static_cast<size_t>(h / group) * hd;
      std::vector<double> w;
      double max_score = -1e300, sum = 0.0;
      for (int s : visible) {
        double dot = 0.0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * p.k[s * p.kv_stride + off + d];
        w.push_back(dot / std::sqrt(static_cast<double>(hd)));
        max_score = std::max(max_score, w.back());
      }
      for (double& x : w) sum += (x = std::exp(x - max_score));
      for (int d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (size_t j = 0; j < visible.size(); ++j) acc += w[j] / sum * p.v[visible[j] * p.kv_stride + off + d];
        out[(static_cast<size_t>(i) * p.shape.n_heads + h) * hd + d] = acc;
      }
    }
  }
  return out;
}

struct Shape { int n_heads, n_kv_heads, head_dim; };
const Shape kShapes[] = {{4, 2, 16}, {8, 8, 5}, {6, 2, 13}, {8, 1, 67}, {4, 4, 64}, {2, 1, 128}};

TEST(Attention, MatchesFloat64ReferenceOnEveryIsa) {
  Rng rng(testing::test_seed("attention reference"));
  for (Isa isa : supported_isas()) {
    const Isa previous = set_active_isa(isa);
    for (const Shape& s : kShapes) {
      const int n_prefix = static_cast<int>(rng.below(40));
      const int m = 1 + static_cast<int>(rng.below(20));
      const AttentionProblem p = random_problem(rng, s.n_heads, s.n_kv_heads, s.head_dim, n_prefix, m);
      const std::vector<float> got = run(p, nullptr);
      const std::vector<double> ref = reference(p);
      const double bound = 3e-6 * (1.0 + s.head_dim / 16.0);  // max|v| <= 1
      double worst = 0.0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref[i]));
      EXPECT_LE(worst, bound) << isa_name(isa) << " heads " << s.n_heads << "/" << s.n_kv_heads
                              << " head_dim " << s.head_dim << " prefix " << n_prefix << " rows " << m;
    }
    set_active_isa(previous);
  }
}

TEST(Attention, RowResultIndependentOfBatchThreadsAndSlotLayout) {
  Rng rng(testing::test_seed("attention invariance"));
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    const Isa previous = set_active_isa(isa);
    for (const Shape& s : kShapes) {
      for (RowTree tree : {RowTree::Random, RowTree::Chain}) {
        const int n_prefix = static_cast<int>(rng.below(30));
        const int m = 1 + static_cast<int>(rng.below(20));
        const AttentionProblem p = random_problem(rng, s.n_heads, s.n_kv_heads, s.head_dim, n_prefix, m, tree);
        const std::vector<float> batch = run(p, nullptr);
        EXPECT_EQ(run(p, &pool), batch) << "2 threads differ";
        const size_t q_dim = static_cast<size_t>(s.n_heads) * s.head_dim;
        for (int i = 0; i < m; ++i) {
          // The same row alone, keys where the batch had them.
          AttentionProblem alone = p;
          alone.parent = {-1};
          alone.q.assign(p.q.begin() + static_cast<std::ptrdiff_t>(i * q_dim), p.q.begin() + static_cast<std::ptrdiff_t>((i + 1) * q_dim));
          alone.extra_slots.assign(p.extra_slots.begin() + p.extra_begin[i], p.extra_slots.begin() + p.extra_begin[i + 1]);
          alone.extra_begin = {0, static_cast<int>(alone.extra_slots.size())};
          const std::vector<float> single = run(alone, &pool);
          EXPECT_EQ(std::memcmp(single.data(), batch.data() + i * q_dim, q_dim * sizeof(float)), 0)
              << isa_name(isa) << " row " << i << " alone";
          // Its ancestors moved into the cached prefix as a chain: prefix + path, then itself.
          AttentionProblem chain = alone;
          const int depth = static_cast<int>(alone.extra_slots.size()) - 1;
          chain.n_prefix = n_prefix + depth;
          chain.n_slots = chain.n_prefix + 1;
          chain.k.assign(static_cast<size_t>(chain.n_slots) * p.kv_stride, 0.0f);
          chain.v.assign(chain.k.size(), 0.0f);
          auto copy_slot = [&](int from, int to) {
            std::memcpy(chain.k.data() + to * p.kv_stride, p.k.data() + from * p.kv_stride, p.kv_stride * sizeof(float));
            std::memcpy(chain.v.data() + to * p.kv_stride, p.v.data() + from * p.kv_stride, p.kv_stride * sizeof(float));
          };
          for (int t = 0; t < n_prefix; ++t) copy_slot(t, t);
          for (int d = 0; d <= depth; ++d) copy_slot(alone.extra_slots[d], n_prefix + d);
          chain.extra_slots = {chain.n_prefix};
          chain.extra_begin = {0, 1};
          const std::vector<float> as_chain = run(chain, nullptr);
          EXPECT_EQ(std::memcmp(as_chain.data(), batch.data() + i * q_dim, q_dim * sizeof(float)), 0)
              << isa_name(isa) << " row " << i << " as a chain";
        }
      }
    }
    // Small problems above run on the caller (attention's work floor); these are well above
    // it (>= 1 M multiply-adds), so the pool splits them over heads and row tiles.
    for (int m : {1, 5, 17}) {
      for (RowTree tree : {RowTree::Random, RowTree::Chain}) {
        const AttentionProblem big = random_problem(rng, 8, 2, 64, 600 + static_cast<int>(rng.below(100)), m, tree);
        EXPECT_EQ(run(big, &pool), run(big, nullptr)) << isa_name(isa) << " M = " << m << ": 2 threads differ";
      }
    }
    set_active_isa(previous);
  }
}

// F16 K/V: bit for bit the F32 result on the values rounded to F16, on every ISA (so the
// reference bound and every invariance above carry over), with 1 or 2 threads, odd head sizes
// (the conversion's tails) and trees; the rounding itself is ggml's (quantize_row).
TEST(Attention, F16KeysAndValuesGiveTheF32ResultOnTheRoundedValues) {
  Rng rng(testing::test_seed("attention f16"));
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    const Isa previous = set_active_isa(isa);
    for (const Shape& s : kShapes) {
      const int n_prefix = static_cast<int>(rng.below(40));
      const int m = 1 + static_cast<int>(rng.below(20));
      AttentionProblem rounded = random_problem(rng, s.n_heads, s.n_kv_heads, s.head_dim, n_prefix, m);
      std::vector<uint16_t> k16(rounded.k.size()), v16(rounded.v.size());  // (n_slots, kv_stride)
      quantize_row(DType::F16, rounded.k.data(), k16.data(), static_cast<int64_t>(k16.size()));
      quantize_row(DType::F16, rounded.v.data(), v16.data(), static_cast<int64_t>(v16.size()));
      dequantize_row(DType::F16, k16.data(), rounded.k.data(), static_cast<int64_t>(k16.size()));
      dequantize_row(DType::F16, v16.data(), rounded.v.data(), static_cast<int64_t>(v16.size()));
      const std::vector<float> want = run(rounded, nullptr);
      for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> got(rounded.q.size(), -7.0f);  // (M, n_heads * head_dim)
        attention(rounded.shape, rounded.rows(), rounded.q.data(), k16.data(), v16.data(), DType::F16,
                  rounded.kv_stride, got.data(), threads);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << isa_name(isa) << " heads " << s.n_heads << "/" << s.n_kv_heads << " head_dim " << s.head_dim
            << (threads ? ", 2 threads" : "");
      }
    }
    set_active_isa(previous);
  }
  std::vector<float> out(8);
  const AttentionProblem p = random_problem(rng, 2, 1, 4, 3, 1);
  EXPECT_THROW(attention(p.shape, p.rows(), p.q.data(), p.k.data(), p.v.data(), DType::Q8_0, p.kv_stride, out.data(),
                         nullptr),
               InternalError);  // a caller's bug: KvCache only holds F32 or F16
}

// The AVX2 softmax (a polynomial exp, sums in double) against float64, per value relative to
// the value (so also for the tiny ones), on long rows of scores
// spread over a wide range (many exp values far below 1, some flushed to 0), every length
// 1..40 (tails) and a 5000-key row; a NaN anywhere makes every output NaN, as in the scalar
// softmax.
TEST(Attention, Avx2SoftmaxMatchesFloat64) {
  bool has_avx2 = false;
  for (Isa isa : supported_isas()) has_avx2 |= isa == Isa::Avx2;
  if (!has_avx2) GTEST_SKIP() << "this CPU has no AVX2";
  Rng rng(testing::test_seed("attention softmax avx2"));
  std::vector<int> lengths;
  for (int n = 1; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(5000);
  for (int n : lengths) {
    const float spread = n % 3 == 0 ? 100.0f : 12.0f;  // 100: some scores 90+ below the max
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = spread * uniform_signed(rng);
    std::vector<float> y = x;
    attention_detail::softmax_avx2(y.data(), n);
    double max_x = x[0], sum = 0.0;
    for (float v : x) max_x = std::max(max_x, static_cast<double>(v));
    for (float v : x) sum += std::exp(static_cast<double>(v) - max_x);
    for (int i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]) - max_x) / sum;
      // relative 1e-6 for the exp and the sum, plus the float rounding of x - max (half an ulp
      // of |x - max| in the argument is that much relative error in the exp)
      const double bound = want * (1e-6 + 6e-8 * std::abs(static_cast<double>(x[i]) - max_x)) + 1e-37;
      ASSERT_NEAR(y[i], want, bound) << "n " << n << " i " << i << " x " << x[i] << " max " << max_x;
    }
    x[rng.below(static_cast<uint64_t>(n))] = std::nanf("");
    attention_detail::softmax_avx2(x.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_TRUE(std::isnan(x[i])) << "n " << n << " i " << i << ": NaN not propagated";
  }
}

// The AVX-512 softmax gives the AVX2 softmax's bits: every length 1..70 (16- and 8-lane parts,
// tails), 4097 and 5000; scores over a wide range (exps flushed to 0), signed zeros as the
// maximum, a -inf, and a NaN anywhere.
TEST(Attention, Avx512SoftmaxGivesTheAvx2Bits) {
  if (detected_isa() != Isa::Avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  Rng rng(testing::test_seed("attention softmax avx512"));
  std::vector<int> lengths;
  for (int n = 1; n <= 70; ++n) lengths.push_back(n);
  lengths.push_back(4097);
  lengths.push_back(5000);
  for (int n : lengths) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> x(static_cast<size_t>(n));
      const float spread = variant == 1 ? 100.0f : 12.0f;
      for (auto& v : x) v = spread * uniform_signed(rng);
      if (variant == 2) {  // zeros of both signs as the maximum
        for (auto& v : x) v = -std::abs(v);
        for (int k = 0; k < n; k += 3) x[static_cast<size_t>(k)] = k % 2 == 0 ? 0.0f : -0.0f;
        x[rng.below(static_cast<uint64_t>(n))] = -std::numeric_limits<float>::infinity();
      }
      if (variant == 3) x[rng.below(static_cast<uint64_t>(n))] = std::nanf("");
      std::vector<float> y2 = x, y5 = x;
      attention_detail::softmax_avx2(y2.data(), n);
      attention_detail::softmax_avx512(y5.data(), n);
      ASSERT_EQ(std::memcmp(y2.data(), y5.data(), sizeof(float) * y2.size()), 0) << "n " << n << " variant " << variant;
    }
  }
}

// The AVX-512 inner loops give the AVX2 loops' bits (the same chains and reduction tree, other
// operands in registers): scores and weighted sums for query counts 1..8, 13, 15, 28, 36, 41, 47
// and 85 (whole and partial blocks of 4 and 6, of the score loop's 40-query chunks, and of its
// 16-query lane groups: 13, 15 and 28's last 12 in partly filled groups, 36, 41 and 85's last
// 4, 9 and 5 through the 4-key loop), key counts 1..64 and 203 (whole and partial blocks of 4
// and 16 keys), F32 and F16, head_dim 64 (the register-blocked paths) and 40 / 128 (which call
// the AVX2 loops).
TEST(Attention, Avx512InnerLoopsGiveTheAvx2Bits) {
  if (detected_isa() != Isa::Avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  Rng rng(testing::test_seed("attention avx512 loops"));
  for (int head_dim : {64, 40, 128}) {
    for (int n_q : {1, 2, 3, 4, 5, 6, 7, 8, 13, 15, 28, 36, 41, 47, 85}) {
      for (int n_keys : {1, 2, 3, 6, 17, 64, 203}) {
        std::vector<float> q(static_cast<size_t>(n_q) * head_dim), kv(static_cast<size_t>(n_keys) * head_dim);
        std::vector<uint16_t> kv16(kv.size());
        for (auto& x : q) x = uniform_signed(rng);
        for (size_t i = 0; i < kv.size(); ++i) {
          kv[i] = uniform_signed(rng);
          kv16[i] = f32_to_fp16(kv[i]);
        }
        std::vector<const float*> rows(static_cast<size_t>(n_keys));
        std::vector<const uint16_t*> rows16(rows.size());
        for (int j = 0; j < n_keys; ++j) {
          rows[j] = kv.data() + static_cast<size_t>(j) * head_dim;
          rows16[j] = kv16.data() + static_cast<size_t>(j) * head_dim;
        }
        const size_t stride = static_cast<size_t>(n_keys) + 3;
        std::vector<float> s2(static_cast<size_t>(n_q) * stride, 7.0f), s5 = s2;
        attention_detail::scores_avx2(q.data(), n_q, rows.data(), n_keys, head_dim, 0.125f, s2.data(), stride);
        attention_detail::scores_avx512(q.data(), n_q, rows.data(), n_keys, head_dim, 0.125f, s5.data(), stride);
        ASSERT_EQ(std::memcmp(s2.data(), s5.data(), sizeof(float) * s2.size()), 0)
            << "scores, head_dim " << head_dim << " n_q " << n_q << " n_keys " << n_keys;
        attention_detail::scores_avx2_f16(q.data(), n_q, rows16.data(), n_keys, head_dim, 0.125f, s2.data(), stride);
        attention_detail::scores_avx512_f16(q.data(), n_q, rows16.data(), n_keys, head_dim, 0.125f, s5.data(), stride);
        ASSERT_EQ(std::memcmp(s2.data(), s5.data(), sizeof(float) * s2.size()), 0)
            << "F16 scores, head_dim " << head_dim << " n_q " << n_q << " n_keys " << n_keys;
        // Weighted sums onto nonzero running outputs (a later key block adds to an earlier one's).
        std::vector<float> o2(static_cast<size_t>(n_q) * head_dim), o5;
        for (auto& x : o2) x = uniform_signed(rng);
        o5 = o2;
        attention_detail::accumulate_avx2(s2.data(), stride, n_q, rows.data(), n_keys, head_dim, o2.data());
        attention_detail::accumulate_avx512(s2.data(), stride, n_q, rows.data(), n_keys, head_dim, o5.data());
        ASSERT_EQ(std::memcmp(o2.data(), o5.data(), sizeof(float) * o2.size()), 0)
            << "weighted sums, head_dim " << head_dim << " n_q " << n_q << " n_keys " << n_keys;
        attention_detail::accumulate_avx2_f16(s2.data(), stride, n_q, rows16.data(), n_keys, head_dim, o2.data());
        attention_detail::accumulate_avx512_f16(s2.data(), stride, n_q, rows16.data(), n_keys, head_dim, o5.data());
        ASSERT_EQ(std::memcmp(o2.data(), o5.data(), sizeof(float) * o2.size()), 0)
            << "F16 weighted sums, head_dim " << head_dim << " n_q " << n_q << " n_keys " << n_keys;
      }
    }
  }
}

}  // namespace
}  // namespace specdec
