// The vocabulary's compact tables: PackedStrings (texts back to back) and TokenIndex (text -> id
// by open addressing) against a std::map built from the same random vocabulary, with
// duplicates (the last id wins, as in llama.cpp), the empty string and absent texts.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/testing.h"
#include "specdec/tokenizer.h"
#include "tokenizer/vocab.h"

namespace specdec {
namespace {

TEST(PackedStrings, HoldsEveryStringAndRejectsIndicesPastTheEnd) {
  PackedStrings table;
  EXPECT_TRUE(table.empty());
  const std::vector<std::string> texts = {"", "a", "", "hello world", std::string("nul\0byte", 8), ""};
  for (const auto& t : texts) table.push_back(t);
  ASSERT_EQ(table.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(table[i], texts[i]) << i;
    EXPECT_EQ(table.at(i), texts[i]) << i;
  }
  EXPECT_THROW((void)table.at(texts.size()), std::out_of_range);
}

TEST(TokenIndex, FindsTheLastIdOfEveryTextAndNothingElse) {
  std::mt19937_64 rng(testing::test_seed("TokenIndex"));
  // Short texts over a small alphabet: many duplicates and shared prefixes.
  std::uniform_int_distribution<int> length(0, 5), letter(0, 3);
  PackedStrings texts;
  std::map<std::string, Token> last_id;
  const int n = 20000;
  for (int id = 0; id < n; ++id) {
    std::string s;
    for (int k = length(rng); k > 0; --k) s.push_back(static_cast<char>('a' + letter(rng)));
    texts.push_back(s);
    last_id[s] = id;
  }
  tok::TokenIndex index;
  EXPECT_EQ(index.find(texts, "a"), -1);  // before build: empty
  index.build(texts);
  for (const auto& [s, id] : last_id) EXPECT_EQ(index.find(texts, s), id) << "'" << s << "'";
  for (int id = 0; id < n; ++id) EXPECT_EQ(texts[static_cast<size_t>(index.find(texts, texts[static_cast<size_t>(id)]))], texts[static_cast<size_t>(id)]);
  EXPECT_EQ(index.find(texts, "aaaaaa"), -1);  // longer than any text
  EXPECT_EQ(index.find(texts, "e"), -1);       // outside the alphabet
}

}  // namespace
}  // namespace specdec
