// rmsnorm, softmax, swiglu, add_inplace and rope against float64 references on random data,
// including odd sizes; the SIMD versions of swiglu, rmsnorm and rope give the scalar bits.
// Bounds: rmsnorm, swiglu: relative 1e-6 per value (a handful of float roundings);
// softmax: 1e-6 * max value; rope: 1e-6 * (|x0| + |x1|) per rotated pair;
// exp_nonpositive: relative 3e-7 (Cephes' polynomial: ~2 ulp) where the result is normal.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <cstring>
#include <limits>

#include "common/testing.h"
#include "kernels/exp_nonpositive.h"
#include "kernels/rowops_impl.h"
#include "specdec/cpu.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::uniform_signed;

TEST(RowOps, RmsnormSoftmaxSwigluAddMatchFloat64) {
  Rng rng(testing::test_seed("rowops"));
  for (int n : {1, 3, 7, 64, 173, 1000}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size()), y(x.size()), up(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = 5.0f * uniform_signed(rng);
      w[i] = 1.0f + uniform_signed(rng);
      up[i] = 3.0f * uniform_signed(rng);
    }
    const float eps = 1e-5f;
    rmsnorm(x.data(), w.data(), n, eps, y.data());
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int i = 0; i < n; ++i) {
      const double ref = x[i] * inv * w[i];
      EXPECT_NEAR(y[i], ref, 1e-6 * std::abs(ref) + 1e-30) << "rmsnorm n " << n << " i " << i;
    }

    std::vector<float> s = x;
    softmax(s.data(), n);
    double max_x = -1e300, sum = 0.0;
    for (float v : x) max_x = std::max(max_x, static_cast<double>(v));
    for (float v : x) sum += std::exp(v - max_x);
    double total = 0.0;
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(s[i], std::exp(x[i] - max_x) / sum, 1e-6) << "softmax n " << n << " i " << i;
      total += s[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);

    std::vector<float> out(x.size());
    swiglu(x.data(), up.data(), n, out.data());
    for (int i = 0; i < n; ++i) {
      const double g = x[i];
      const double ref = g / (1.0 + std::exp(-g)) * up[i];
      EXPECT_NEAR(out[i], ref, 1e-6 * std::abs(ref) + 1e-30) << "swiglu n " << n << " i " << i;
    }

    std::vector<float> acc = up;
    add_inplace(acc.data(), x.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(acc[i], up[i] + x[i]);
  }
}

TEST(RowOps, SwigluMatchesFloat64OverAWideRange) {
  Rng rng(testing::test_seed("rowops swiglu range"));
  const int n = 4099;
  std::vector<float> g(n), up(n), out(n);
  for (int i = 0; i < n; ++i) {
    g[i] = 60.0f * uniform_signed(rng);
    up[i] = 3.0f * uniform_signed(rng);
  }
  swiglu(g.data(), up.data(), n, out.data());
  for (int i = 0; i < n; ++i) {
    const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * up[i];
    EXPECT_NEAR(out[i], ref, 1e-6 * std::abs(ref) + 1e-37) << "g " << g[i] << " up " << up[i];
  }
}

TEST(RowOps, ExpNonpositiveIsWithinThreeUlpOfStdExp) {
  using kernels_detail::exp_nonpositive_scalar;
  Rng rng(testing::test_seed("rowops exp"));
  for (int i = 0; i < 200000; ++i) {
    const float x = -87.0f * static_cast<float>(rng.uniform());
    const double ref = std::exp(static_cast<double>(x));
    EXPECT_NEAR(exp_nonpositive_scalar(x), ref, 3e-7 * ref) << "x " << x;
  }
  EXPECT_EQ(exp_nonpositive_scalar(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive_scalar(-0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive_scalar(-87.5f), 0.0f);
  EXPECT_EQ(exp_nonpositive_scalar(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(exp_nonpositive_scalar(std::numeric_limits<float>::quiet_NaN())));
}

// The same bits, or both NaN (a NaN's sign and payload follow operand order, which the
// compiler may swap in a multiplication).
int count_different(const std::vector<float>& a, const std::vector<float>& b) {
  int n_different = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) ++n_different;
  return n_different;
}

// swiglu on AVX2 and AVX-512 (whichever this CPU has) gives the scalar version's bits for every
// element, whatever n and the element's position (the vector bodies and their scalar tails).
TEST(RowOps, SwigluIsTheSameBitsOnEveryIsa) {
  Rng rng(testing::test_seed("rowops swiglu isa"));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 87.3f, -87.3f, 87.31f, -87.31f, 88.8f, -88.8f,
                            1e30f, -1e30f, inf, -inf, nan, 0.5f, -0.5f, 1e-8f};
  std::vector<float> g(1000), up(1000);
  for (size_t i = 0; i < g.size(); ++i) {
    const uint64_t kind = rng.below(4);
    g[i] = kind == 0 ? specials[rng.below(std::size(specials))]
                     : static_cast<float>(std::ldexp(uniform_signed(rng), static_cast<int>(rng.below(16)) - 4));
    up[i] = 4.0f * uniform_signed(rng);
  }
  const bool avx512 = detected_isa() == Isa::Avx512, avx2 = detected_isa() >= Isa::Avx2;
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar swiglu runs here";
  for (int offset : {0, 1, 5}) {
    for (int n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 500, 995}) {
      std::vector<float> scalar(n), simd(n);
      kernels_detail::swiglu_scalar(g.data() + offset, up.data() + offset, n, scalar.data());
      kernels_detail::swiglu_avx2(g.data() + offset, up.data() + offset, n, simd.data());
      EXPECT_EQ(count_different(scalar, simd), 0) << "avx2 n " << n << " offset " << offset;
      if (avx512) {
        kernels_detail::swiglu_avx512(g.data() + offset, up.data() + offset, n, simd.data());
        EXPECT_EQ(count_different(scalar, simd), 0) << "avx512 n " << n << " offset " << offset;
      }
    }
  }
}

// Reference rotation of one head in long double.
void rope_reference(const std::vector<float>& in, std::vector<double>& out, int n_heads, int head_dim,
                    int pos, const RopeParams& p) {
  out.assign(in.begin(), in.end());
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < half; ++i) {
      long double theta = static_cast<long double>(pos) * p.freq_scale *
                          std::pow(static_cast<long double>(p.freq_base), -2.0L * i / p.n_rot);
      if (p.freq_factors) theta /= p.freq_factors[i];
      const int a = h * head_dim + (p.layout == RopeLayout::Norm ? 2 * i : i);
      const int b = a + (p.layout == RopeLayout::Norm ? 1 : half);
      const long double x0 = in[a], x1 = in[b];
      out[a] = static_cast<double>(x0 * std::cos(theta) - x1 * std::sin(theta));
      out[b] = static_cast<double>(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  }
}

TEST(Rope, NormAndNeoxLayoutsWithScalingAndFactorsMatchReference) {
  Rng rng(testing::test_seed("rope"));
  struct Case { int n_heads, head_dim, n_rot; RopeLayout layout; float base, scale; bool factors; };
  const Case cases[] = {{4, 16, 16, RopeLayout::Norm, 10000.0f, 1.0f, false},
                        {2, 64, 32, RopeLayout::Norm, 10000.0f, 0.25f, false},
                        {3, 10, 6, RopeLayout::Neox, 1e6f, 1.0f, false},
                        {4, 128, 128, RopeLayout::Neox, 1e6f, 1.0f, false},
                        {2, 32, 32, RopeLayout::Norm, 500000.0f, 1.0f, true},
                        {1, 8, 8, RopeLayout::Norm, 10000.0f, 1.0f, false}};
  for (const Case& c : cases) {
    std::vector<float> factors(static_cast<size_t>(c.n_rot / 2));
    for (float& f : factors) f = 1.0f + 7.0f * static_cast<float>(rng.uniform());
    RopeParams p;
    p.n_rot = c.n_rot;
    p.freq_base = c.base;
    p.freq_scale = c.scale;
    p.layout = c.layout;
    p.freq_factors = c.factors ? factors.data() : nullptr;
    for (int pos : {0, 1, 17, 1000, 131071}) {
      std::vector<float> x(static_cast<size_t>(c.n_heads * c.head_dim));
      for (float& v : x) v = 3.0f * uniform_signed(rng);
      std::vector<double> ref;
      rope_reference(x, ref, c.n_heads, c.head_dim, pos, p);
      std::vector<float> got = x;
      rope(got.data(), c.n_heads, c.head_dim, pos, p);
      for (size_t i = 0; i < x.size(); ++i) {
        const int d = static_cast<int>(i) % c.head_dim;
        if (d >= c.n_rot) {
          EXPECT_EQ(got[i], x[i]) << "dims past n_rot must be untouched";
        } else {
          EXPECT_NEAR(got[i], ref[i], 1e-6 * 6.0) << "head_dim " << c.head_dim << " pos " << pos << " i " << i;
        }
      }
      if (pos == 0) {
        EXPECT_EQ(got, x) << "position 0 is the identity";
      }
    }
  }
}

TEST(Rope, LayoutsDifferAndFactorsMatter) {
  std::vector<float> x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.1f - 0.7f;
  RopeParams norm;
  norm.n_rot = 16;
  RopeParams neox = norm;
  neox.layout = RopeLayout::Neox;
  std::vector<float> a = x, b = x, c = x;
  rope(a.data(), 1, 16, 5, norm);
  rope(b.data(), 1, 16, 5, neox);
  EXPECT_NE(a, b);
  std::vector<float> factors(8, 4.0f);
  RopeParams scaled = norm;
  scaled.freq_factors = factors.data();
  rope(c.data(), 1, 16, 20, scaled);  // pos 20 / factor 4 == pos 5 without factors
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(c[i], a[i], 1e-6);
}

// rmsnorm on AVX2 and AVX-512 gives the scalar version's bits: the same 32 double lanes and
// the same tree, whatever n (vector body, tail, both) and the row's alignment. The sums of
// squares are compared too: the values span 40 binades, so that a different summation order
// shows in a double sum's last bits even where the float result rounds it away.
TEST(RowOps, RmsnormIsTheSameBitsOnEveryIsa) {
  if (detected_isa() < Isa::Avx2) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar rmsnorm runs here";
  const bool avx512 = detected_isa() == Isa::Avx512;
  Rng rng(testing::test_seed("rowops rmsnorm isa"));
  std::vector<float> x(9000), w(9000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(std::ldexp(uniform_signed(rng), static_cast<int>(rng.below(40)) - 20));
    w[i] = 1.0f + uniform_signed(rng);
  }
  int n_rows = 0, n_order_sensitive = 0;
  for (int offset : {0, 1, 3}) {
    for (int n : {1, 5, 31, 32, 33, 63, 64, 100, 576, 2048, 2049, 8191}) {
      const float* xs = x.data() + offset;
      const double sum = kernels_detail::sum_squares_scalar(xs, n);
      EXPECT_EQ(kernels_detail::sum_squares_avx2(xs, n), sum) << "avx2 n " << n << " offset " << offset;
      if (avx512) {
        EXPECT_EQ(kernels_detail::sum_squares_avx512(xs, n), sum) << "avx512 n " << n << " offset " << offset;
      }
      double index_order = 0.0;
      for (int i = 0; i < n; ++i) index_order += static_cast<double>(xs[i] * xs[i]);
      ++n_rows;
      n_order_sensitive += index_order != sum;

      std::vector<float> scalar(n), simd(n);
      kernels_detail::rmsnorm_scalar(xs, w.data() + offset, n, 1e-6f, scalar.data());
      kernels_detail::rmsnorm_avx2(xs, w.data() + offset, n, 1e-6f, simd.data());
      EXPECT_EQ(count_different(scalar, simd), 0) << "avx2 n " << n << " offset " << offset;
      if (avx512) {
        kernels_detail::rmsnorm_avx512(xs, w.data() + offset, n, 1e-6f, simd.data());
        EXPECT_EQ(count_different(scalar, simd), 0) << "avx512 n " << n << " offset " << offset;
      }
      std::vector<float> in_place(xs, xs + n);
      rmsnorm(in_place.data(), w.data() + offset, n, 1e-6f, in_place.data());
      EXPECT_EQ(count_different(scalar, in_place), 0) << "in place, n " << n << " offset " << offset;
    }
  }
  // The comparison above can tell orders apart: most long rows' sums differ from index order.
  EXPECT_GT(n_order_sensitive, n_rows / 4) << "the inputs no longer expose the summation order";
}

// rope_apply on AVX2 and AVX-512 gives the scalar version's bits for both layouts, with n_rot
// below head_dim (the rest untouched) and pair counts that leave scalar tails.
TEST(Rope, ApplyIsTheSameBitsOnEveryIsa) {
  if (detected_isa() < Isa::Avx2) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar rope runs here";
  const bool avx512 = detected_isa() == Isa::Avx512;
  Rng rng(testing::test_seed("rope isa"));
  struct Case { int n_heads, head_dim, n_rot; };
  const Case cases[] = {{3, 64, 64}, {2, 128, 128}, {2, 64, 32}, {3, 10, 6}, {2, 80, 40}, {1, 96, 72}, {4, 8, 8}};
  for (RopeLayout layout : {RopeLayout::Norm, RopeLayout::Neox}) {
    for (const Case& c : cases) {
      RopeParams p;
      p.n_rot = c.n_rot;
      p.layout = layout;
      std::vector<float> cos_sin(static_cast<size_t>(c.n_rot));
      rope_cos_sin(1 + static_cast<int>(rng.below(5000)), p, cos_sin.data());
      std::vector<float> x(static_cast<size_t>(c.n_heads * c.head_dim));
      for (float& v : x) v = static_cast<float>(std::ldexp(uniform_signed(rng), static_cast<int>(rng.below(12)) - 6));
      std::vector<float> scalar = x, simd = x;
      kernels_detail::rope_apply_scalar(scalar.data(), c.n_heads, c.head_dim, cos_sin.data(), p);
      EXPECT_NE(scalar, x);
      const char* what = layout == RopeLayout::Norm ? "norm" : "neox";
      kernels_detail::rope_apply_avx2(simd.data(), c.n_heads, c.head_dim, cos_sin.data(), p);
      EXPECT_EQ(count_different(scalar, simd), 0) << "avx2 " << what << " head_dim " << c.head_dim << " n_rot " << c.n_rot;
      if (avx512) {
        simd = x;
        kernels_detail::rope_apply_avx512(simd.data(), c.n_heads, c.head_dim, cos_sin.data(), p);
        EXPECT_EQ(count_different(scalar, simd), 0) << "avx512 " << what << " head_dim " << c.head_dim << " n_rot " << c.n_rot;
      }
    }
  }
}

}  // namespace
}  // namespace specdec
