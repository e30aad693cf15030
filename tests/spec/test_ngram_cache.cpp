// LookupCache: save/load round trip, atomic save, foreign/corrupt/truncated/random files give a
// clear Error (or a warning from load_or_empty), never a crash; drafters drafting from it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/error.h"
#include "specdec/lookup_cache.h"
#include "specdec/ngram.h"
#include "specdec/prompt_lookup.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::read_bytes;
using testing::write_bytes;

constexpr int kVocab = 64;
constexpr uint64_t kFingerprint = 0x1234abcd5678ef90ULL;

using testing::kGreedy;

std::string temp_path(const std::string& name) { return specdec::testing::temp_dir() + "/" + name; }

// Rewrites the trailing checksum so that content checks (not the checksum) must catch a change.
void fix_checksum(std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() - 8;
  uint64_t sum = fnv1a64(bytes.data(), n);
  for (int i = 0; i < 8; ++i) bytes[n + static_cast<size_t>(i)] = static_cast<uint8_t>(sum >> (8 * i));
}

std::vector<Token> random_text(Rng& rng, size_t n) {
  std::vector<Token> out;  // (n) a few phrases repeated with noise
  std::vector<std::vector<Token>> phrases(6);
  for (auto& p : phrases) {
    for (int i = 0; i < 5; ++i) p.push_back(static_cast<Token>(rng.below(kVocab)));
  }
  while (out.size() < n) {
    if (rng.below(3) == 0) {
      out.push_back(static_cast<Token>(rng.below(kVocab)));
    } else {
      const auto& p = phrases[rng.below(phrases.size())];
      out.insert(out.end(), p.begin(), p.end());
    }
  }
  out.resize(n);
  return out;
}

std::string saved_cache(const std::string& name) {
  Rng rng(7);
  LookupCache cache(kVocab, kFingerprint);
  cache.add_sequence(random_text(rng, 400));
  const std::string path = temp_path(name);
  cache.save(path);
  return path;
}

TEST(LookupCache, RoundTripKeepsEveryCountAndIsByteStable) {
  Rng rng(specdec::testing::test_seed("lookup cache round trip"));
  LookupCache cache(kVocab, kFingerprint);
  cache.add_sequence(random_text(rng, 2000));
  ASSERT_GT(cache.n_contexts(), 0u);
  const std::string path = temp_path("round_trip.ngc");
  cache.save(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  LookupCache loaded = LookupCache::load(path, kVocab, kFingerprint);
  ASSERT_EQ(loaded.n_contexts(), cache.n_contexts());
  for (const auto& [key, entry] : cache.table().entries()) {
    const auto& other = loaded.table().entries().at(key);
    EXPECT_EQ(other.total, entry.total);
    EXPECT_EQ(loaded.table().best(key).token, cache.table().best(key).token);
  }
  const std::string again = temp_path("round_trip_again.ngc");
  loaded.save(again);
  EXPECT_EQ(read_bytes(path), read_bytes(again));
}

TEST(LookupCache, ForeignVocabularyIsAClearError) {
  const std::string path = saved_cache("foreign.ngc");
  try {
    LookupCache::load(path, kVocab + 1, kFingerprint);
    FAIL() << "a cache for another vocabulary size loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary of 64 tokens"), std::string::npos) << e.what();
  }
  try {
    LookupCache::load(path, kVocab, kFingerprint + 1);
    FAIL() << "a cache for another tokenizer loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different tokenizer"), std::string::npos) << e.what();
  }
  std::string warning;
  LookupCache empty = LookupCache::load_or_empty(path, kVocab + 1, kFingerprint, {}, &warning);
  EXPECT_EQ(empty.n_contexts(), 0u);
  EXPECT_NE(warning.find(path), std::string::npos) << warning;
}

TEST(LookupCache, MissingFileIsAnEmptyCacheWithoutWarning) {
  std::string warning = "x";
  LookupCache c = LookupCache::load_or_empty(temp_path("does-not-exist.ngc"), kVocab, kFingerprint, {}, &warning);
  EXPECT_EQ(c.n_contexts(), 0u);
  EXPECT_TRUE(warning.empty());
  EXPECT_THROW(LookupCache::load(temp_path("does-not-exist.ngc"), kVocab, kFingerprint), Error);
}

TEST(LookupCache, EveryTruncationIsAnError) {
  const std::string path = saved_cache("truncate_src.ngc");
  const std::vector<uint8_t> bytes = read_bytes(path);
  const std::string cut = temp_path("truncated.ngc");
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 8) {
    write_bytes(cut, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n)));
    EXPECT_THROW(LookupCache::load(cut, kVocab, kFingerprint), Error) << "truncated to " << n << " bytes";
    std::string warning;
    LookupCache::load_or_empty(cut, kVocab, kFingerprint, {}, &warning);
    EXPECT_FALSE(warning.empty());
  }
}

TEST(LookupCache, GarbledAndRandomFilesAreErrors) {
  Rng rng(specdec::testing::test_seed("lookup cache garbled"));
  const std::string path = saved_cache("garble_src.ngc");
  const std::vector<uint8_t> bytes = read_bytes(path);
  const std::string bad = temp_path("garbled.ngc");
  for (int trial = 0; trial < 100 / specdec::testing::sanitizer_slowdown(); ++trial) {
    std::vector<uint8_t> g = bytes;
    const size_t at = rng.below(g.size());
    g[at] = static_cast<uint8_t>(g[at] ^ (1 + rng.below(255)));
    write_bytes(bad, g);
    EXPECT_THROW(LookupCache::load(bad, kVocab, kFingerprint), Error) << "byte " << at << " changed";
  }
  for (int trial = 0; trial < 40 / specdec::testing::sanitizer_slowdown(); ++trial) {
    std::vector<uint8_t> noise(rng.below(300));
    for (auto& b : noise) b = static_cast<uint8_t>(rng.below(256));
    if (trial % 2 == 0 && noise.size() >= 8) std::copy_n("SDNGRAM", 8, noise.begin());  // right magic, junk after
    write_bytes(bad, noise);
    EXPECT_THROW(LookupCache::load(bad, kVocab, kFingerprint), Error);
  }
}

TEST(LookupCache, BadContentBehindAValidChecksumIsAnError) {
  const std::string path = saved_cache("content_src.ngc");
  const std::vector<uint8_t> bytes = read_bytes(path);
  const std::string bad = temp_path("bad_content.ngc");
  constexpr size_t kEntries = 32;       // offset of n_entries
  constexpr size_t kFirstEntry = 40;    // key u64, n_next u32, then (token, count)
  auto expect_error = [&](std::vector<uint8_t> g, const char* what, const char* message) {
    fix_checksum(g);
    write_bytes(bad, g);
    try {
      LookupCache::load(bad, kVocab, kFingerprint);
      ADD_FAILURE() << what << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << what << ": " << e.what();
    }
  };
  std::vector<uint8_t> g = bytes;
  g[kEntries + 7] = 0x7f;  // a huge entry count
  expect_error(g, "huge n_entries", "cannot fit");
  g = bytes;
  g[kFirstEntry + 8 + 3] = 0x40;  // a huge n_next
  expect_error(g, "huge n_next", "invalid size");
  g = bytes;
  g[kFirstEntry + 12] = 200;  // first token id 200 >= 64
  expect_error(g, "token out of range", "outside the vocabulary");
  g = bytes;
  for (size_t i = 0; i < 4; ++i) g.at(kFirstEntry + 16 + i) = 0;  // first count 0
  expect_error(g, "zero count", "invalid count");
  g = bytes;
  g[8] = 9;  // version 9
  expect_error(g, "future version", "unsupported version 9");
  g = bytes;
  g.insert(g.end() - 8, {1, 2, 3});
  expect_error(g, "trailing bytes", "unexpected bytes");
}

TEST(LookupCache, SaveFailureIsAnErrorAndLeavesNoFile) {
  LookupCache cache(kVocab, kFingerprint);
  EXPECT_THROW(cache.save(temp_path("no/such/dir/cache.ngc")), Error);
}

TEST(LookupCache, PruningBoundsTheNumberOfContexts) {
  Rng rng(specdec::testing::test_seed("lookup cache prune"));
  LookupCacheConfig c;
  c.max_contexts = 300;
  LookupCache cache(kVocab, kFingerprint, c);
  for (int i = 0; i < 10; ++i) {
    cache.add_sequence(random_text(rng, 500));
    EXPECT_LE(cache.n_contexts(), c.max_contexts);
  }
  EXPECT_THROW(LookupCache(kVocab, kFingerprint, LookupCacheConfig{1, 4}), Error);
}

TEST(LookupCache, RepeatedWorkloadDraftsFromTheFirstToken) {
  Rng rng(specdec::testing::test_seed("lookup cache workload"));
  std::vector<Token> document;  // (kVocab) every token once, so every context is unique
  for (Token t = 0; t < kVocab; ++t) document.push_back(t);
  for (size_t i = document.size() - 1; i > 0; --i) std::swap(document[i], document[rng.below(i + 1)]);
  LookupCacheConfig config;
  config.min_count = 1;
  const std::string path = temp_path("workload.ngc");
  const std::vector<Token> prompt(document.begin(), document.begin() + 3);
  {  // First run: the drafter sees the whole document and the cache is saved at exit.
    auto cache = std::make_shared<LookupCache>(kVocab, kFingerprint, config);
    NgramDrafter drafter(NgramConfig{}, cache);
    drafter.begin(document);
    drafter.flush_to_cache();
    cache->save(path);
  }
  // Second run: a fresh drafter given the document's first 3 tokens knows the rest.
  auto cache = std::make_shared<LookupCache>(LookupCache::load(path, kVocab, kFingerprint, config));
  NgramDrafter with_cache(NgramConfig{}, cache);
  NgramDrafter without_cache;
  with_cache.begin(prompt);
  without_cache.begin(prompt);
  const std::vector<Token> expected(document.begin() + 3, document.begin() + 11);
  EXPECT_EQ(with_cache.propose(prompt, 8, kGreedy).tokens, expected);
  EXPECT_TRUE(without_cache.propose(prompt, 8, kGreedy).empty());
  // The lookup drafter falls back on the cache when the context has no match.
  PromptLookupDrafter lookup(PromptLookupConfig{}, cache);
  lookup.begin(prompt);
  EXPECT_EQ(lookup.propose(prompt, 8, kGreedy).tokens, expected);
  // Committed tokens reach the cache once: begin() of the next sequence flushes the previous one.
  auto counted = std::make_shared<LookupCache>(kVocab, kFingerprint, config);
  LookupCache reference(kVocab, kFingerprint, config);
  reference.add_sequence(document);
  PromptLookupDrafter recorder(PromptLookupConfig{}, counted);
  recorder.begin(prompt);
  recorder.propose(document, 4, kGreedy);  // the rest of the document became committed
  recorder.flush_to_cache();
  recorder.flush_to_cache();
  recorder.begin(std::vector<Token>{});
  ASSERT_EQ(counted->n_contexts(), reference.n_contexts());
  for (const auto& [key, entry] : reference.table().entries()) {
    EXPECT_EQ(counted->table().entries().at(key).total, entry.total);
  }
}

}  // namespace
}  // namespace specdec
