// tests/sampling/chi_square.h — Pearson chi-square goodness of fit against EXACT probabilities,
// shared by test_sampling and test_spec (include as "sampling/chi_square.h").
//
// Cells whose expected count is below 5 are lumped together (so the chi-square approximation
// holds); a count observed in a cell of probability 0 is an immediate failure (p-value 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace specdec::testing {

// The false-failure probability of one run of a family of chi-square checks (each check is
// held to kFamilyAlpha / the family's size).
inline constexpr double kFamilyAlpha = 1e-4;

// Regularised upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a), a > 0, x >= 0.
// Series below a + 1, Lentz continued fraction above (both converge fast there).
inline double upper_incomplete_gamma(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

// P(chi2_df >= statistic).
inline double chi_square_p_value(double statistic, int df) {
  if (df <= 0) return 1.0;
  return upper_incomplete_gamma(0.5 * df, 0.5 * statistic);
}

struct ChiSquareResult {
  double statistic = 0.0;
  int df = 0;
  double p_value = 1.0;
  std::string detail;  // observed vs expected per cell, for failure messages
};

// observed: (n_cells) counts; probs: (n_cells) exact probabilities summing to 1.
inline ChiSquareResult chi_square_test(const std::vector<int64_t>& observed, const std::vector<double>& probs) {
  ChiSquareResult result;
  int64_t n_total = 0;
  for (int64_t c : observed) n_total += c;
  std::ostringstream detail;
  detail << "n=" << n_total << " cells (observed/expected):";
  double lumped_observed = 0.0, lumped_expected = 0.0;
  int n_cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double expected = probs[i] * static_cast<double>(n_total);
    if (observed.size() <= 16) detail << " [" << i << "] " << observed[i] << "/" << expected;
    if (probs[i] <= 0.0) {
      if (observed[i] > 0) {
        result.p_value = 0.0;
        result.statistic = std::numeric_limits<double>::infinity();
        detail << " <- observed in a cell of probability 0";
        result.detail = detail.str();
        return result;
      }
      continue;
    }
    if (expected < 5.0) {
      lumped_observed += static_cast<double>(observed[i]);
      lumped_expected += expected;
      continue;
    }
    const double diff = static_cast<double>(observed[i]) - expected;
    result.statistic += diff * diff / expected;
    ++n_cells;
  }
  if (lumped_expected > 0.0) {
    const double diff = lumped_observed - lumped_expected;
    result.statistic += diff * diff / lumped_expected;
    ++n_cells;
  }
  result.df = n_cells - 1;
  result.p_value = chi_square_p_value(result.statistic, result.df);
  detail << " chi2=" << result.statistic << " df=" << result.df << " p=" << result.p_value;
  result.detail = detail.str();
  return result;
}

}  // namespace specdec::testing
