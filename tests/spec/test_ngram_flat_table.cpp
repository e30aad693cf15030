// FlatKeyTable and FlatNgramTable (the n-gram drafter's window tables): forced collisions,
// backward-shift deletion across wrap-around, capacity bounds, overflow chains, and agreement
// with the reference NgramTable under random add/remove sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <unordered_map>
#include <vector>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/flat_table.h"
#include "specdec/ngram.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

// `n` distinct keys whose home slot in a table of `n_slots` slots is `slot`.
std::vector<uint64_t> keys_at(size_t slot, size_t n_slots, int n, uint64_t start = 1) {
  std::vector<uint64_t> out;
  for (uint64_t k = start; static_cast<int>(out.size()) < n; ++k) {
    if (FlatKeyTable<int>::home_slot_in(k, n_slots) == slot) out.push_back(k);
  }
  return out;
}

TEST(FlatKeyTable, CollidingKeysSurviveEraseInAnyOrder) {
  // max_size 4: 8 slots. Five keys homed at the last slot wrap around to slots 0..3.
  FlatKeyTable<int> table(4);
  bool inserted = false;
  ASSERT_NE(table.find_or_insert(999, &inserted), nullptr);  // allocates the 8 slots
  ASSERT_TRUE(table.erase(999));
  ASSERT_EQ(table.slot_count(), 8u);
  const std::vector<uint64_t> last = keys_at(7, 8, 3);
  const std::vector<uint64_t> first = keys_at(0, 8, 1);
  for (uint64_t k : last) ASSERT_EQ(table.home_slot(k), 7u);
  std::vector<uint64_t> keys = {last[0], last[1], first[0], last[2]};  // run 7, 0, 1, 2
  for (size_t i = 0; i < keys.size(); ++i) {
    int* v = table.find_or_insert(keys[i], &inserted);
    ASSERT_NE(v, nullptr);
    ASSERT_TRUE(inserted);
    *v = static_cast<int>(i) + 10;
  }
  // Full at max_size: a new key is refused, an existing one is found.
  EXPECT_EQ(table.find_or_insert(keys_at(3, 8, 1)[0], &inserted), nullptr);
  EXPECT_EQ(*table.find_or_insert(keys[2], &inserted), 12);
  EXPECT_FALSE(inserted);
  // Erase the head of the run: every other key must stay reachable (backward shift).
  ASSERT_TRUE(table.erase(keys[0]));
  EXPECT_EQ(table.find(keys[0]), nullptr);
  for (size_t i = 1; i < keys.size(); ++i) {
    ASSERT_NE(table.find(keys[i]), nullptr) << i;
    EXPECT_EQ(*table.find(keys[i]), static_cast<int>(i) + 10);
  }
  EXPECT_FALSE(table.erase(keys[0]));
  ASSERT_TRUE(table.erase(keys[2]));  // the key homed at slot 0, in the middle of the run
  EXPECT_EQ(*table.find(keys[1]), 11);
  EXPECT_EQ(*table.find(keys[3]), 13);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.slot_count(), 8u);  // never grows past bit_ceil(2 * max_size)
}

TEST(FlatKeyTable, MatchesUnorderedMapUnderRandomChurn) {
  Rng rng(testing::test_seed("flat key table churn"));
  for (size_t max_size : {size_t{1}, size_t{3}, size_t{5}, size_t{0}}) {
    FlatKeyTable<uint32_t> table(max_size);
    std::unordered_map<uint64_t, uint32_t> want;
    const uint64_t n_keys = max_size == 0 ? 200 : 2 * max_size + 1;  // small key space: many collisions
    for (int step = 0; step < 4000; ++step) {
      const uint64_t key = 1000 + rng.below(n_keys);
      if (rng.below(3) == 0) {
        ASSERT_EQ(table.erase(key), want.erase(key) == 1);
      } else {
        bool inserted = false;
        uint32_t* v = table.find_or_insert(key, &inserted);
        const bool present = want.count(key) == 1;
        if (!present && max_size > 0 && want.size() >= max_size) {
          ASSERT_EQ(v, nullptr);
          continue;
        }
        ASSERT_NE(v, nullptr);
        ASSERT_EQ(inserted, !present);
        ++*v;
        ++want[key];
      }
      ASSERT_EQ(table.size(), want.size());
      if (max_size > 0) {
        ASSERT_LE(table.slot_count(), std::bit_ceil(2 * max_size));
      }
      for (uint64_t k = 1000; k < 1000 + n_keys; ++k) {
        const uint32_t* v = table.find(k);
        auto it = want.find(k);
        ASSERT_EQ(v != nullptr, it != want.end()) << "key " << k << " step " << step;
        if (v) {
          ASSERT_EQ(*v, it->second);
        }
      }
    }
    size_t n_seen = 0;
    table.for_each([&](uint64_t k, uint32_t v) {
      ++n_seen;
      EXPECT_EQ(want.count(k), 1u);
      if (want.count(k) == 1) {
        EXPECT_EQ(want.at(k), v);
      }
    });
    EXPECT_EQ(n_seen, want.size());
    table.clear();
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.find(1000), nullptr);
  }
}

TEST(FlatNgramTable, RejectsZeroBounds) {
  EXPECT_THROW(FlatNgramTable(0, 4), Error);
  EXPECT_THROW(FlatNgramTable(4, 0), Error);
}

TEST(FlatNgramTable, OverflowChainKeepsExactCountsAndTies) {
  FlatNgramTable table(4, 16);
  const uint64_t key = 7;
  EXPECT_EQ(table.best(key).token, -1);
  EXPECT_TRUE(table.top(key, 3).empty());
  // Seven distinct next tokens: four inline, three in the overflow chain.
  for (Token t = 10; t < 17; ++t) ASSERT_TRUE(table.add(key, t, static_cast<uint32_t>(t)));
  ASSERT_TRUE(table.add(key, 15, 30));  // an overflow token becomes the most frequent
  EXPECT_EQ(table.n_pairs(), 7u);
  NgramPrediction p = table.best(key);
  EXPECT_EQ(p.token, 15);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.total, 8u);
  std::vector<NgramPrediction> top = table.top(key, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[1].token, 16);  // ties on count: the most recent first
  EXPECT_EQ(top[2].token, 14);
  // Remove inline tokens: overflow candidates move inline, nothing is lost.
  for (Token t = 10; t < 14; ++t) table.remove(key, t);
  EXPECT_EQ(table.n_pairs(), 3u);
  EXPECT_EQ(table.best(key).token, 15);
  table.remove(key, 16);
  table.remove(key, 15);
  EXPECT_EQ(table.best(key).token, 15);  // both at count 1 now: 15, last seen at 30, wins
  EXPECT_EQ(table.best(key).total, 2u);
  EXPECT_THROW(table.remove(key, 10), InternalError);
  table.remove(key, 15);
  EXPECT_EQ(table.best(key).token, 14);
  table.remove(key, 14);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.n_pairs(), 0u);
  EXPECT_THROW(table.remove(key, 16), InternalError);
}

TEST(FlatNgramTable, RefusesObservationsBeyondItsBounds) {
  FlatNgramTable table(2, 3);
  EXPECT_TRUE(table.add(1, 5, 0));
  EXPECT_TRUE(table.add(2, 5, 1));
  EXPECT_FALSE(table.add(3, 5, 2));  // a third context
  EXPECT_TRUE(table.add(1, 6, 3));   // a third pair
  EXPECT_FALSE(table.add(2, 6, 4));  // a fourth pair
  EXPECT_TRUE(table.add(2, 5, 5));   // more of a known pair is always fine
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.n_pairs(), 3u);
  EXPECT_EQ(table.best(2).count, 2u);
  EXPECT_EQ(table.best(3).token, -1);
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.add(3, 5, 6));
}

// Random adds and removes of earlier observations, with few context keys (forced collisions in a
// tiny table) and up to 9 distinct next tokens (overflow chains): best() and top() must equal the
// reference NgramTable's, whose entries own their candidate vectors.
TEST(FlatNgramTable, MatchesReferenceTableUnderRandomChurn) {
  Rng rng(testing::test_seed("flat ngram table churn"));
  for (int trial = 0; trial < 20; ++trial) {
    const int n_keys = 1 + static_cast<int>(rng.below(6));
    const int n_tokens = 1 + static_cast<int>(rng.below(9));
    FlatNgramTable flat(static_cast<size_t>(n_keys), static_cast<size_t>(n_keys * n_tokens));
    NgramTable reference;
    std::vector<std::pair<uint64_t, Token>> live;  // observations added and not yet removed, oldest first
    for (uint32_t pos = 0; pos < 600; ++pos) {
      if (!live.empty() && rng.below(5) < 2) {
        const auto [key, token] = live.front();  // the oldest leaves, as in the sliding window
        live.erase(live.begin());
        flat.remove(key, token);
        reference.remove(key, token);
      } else {
        const uint64_t key = 77 + rng.below(static_cast<uint64_t>(n_keys));
        const Token token = static_cast<Token>(rng.below(static_cast<uint64_t>(n_tokens)));
        ASSERT_TRUE(flat.add(key, token, pos));
        reference.add(key, token, 1, pos);
        live.emplace_back(key, token);
      }
      ASSERT_EQ(flat.size(), reference.size());
      for (uint64_t key = 77; key < 77 + static_cast<uint64_t>(n_keys); ++key) {
        const NgramPrediction a = flat.best(key), b = reference.best(key);
        ASSERT_EQ(a.token, b.token) << "trial " << trial << " pos " << pos;
        ASSERT_EQ(a.count, b.count);
        ASSERT_EQ(a.total, b.total);
        const auto ta = flat.top(key, 5), tb = reference.top(key, 5);
        ASSERT_EQ(ta.size(), tb.size());
        for (size_t i = 0; i < ta.size(); ++i) {
          ASSERT_EQ(ta[i].token, tb[i].token);
          ASSERT_EQ(ta[i].count, tb[i].count);
        }
      }
    }
  }
}

}  // namespace
}  // namespace specdec
