// --spec parsing, the model-free drafter factory and the --lookup-cache file life cycle.
#include <gtest/gtest.h>

#include <fstream>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/model_free.h"

namespace specdec {
namespace {

TEST(ModelFreeOptions, ParsesEverySpecMethod) {
  for (SpecMethod m : {SpecMethod::None, SpecMethod::Draft, SpecMethod::Ngram, SpecMethod::Lookup, SpecMethod::Hybrid,
                       SpecMethod::Tree, SpecMethod::Medusa, SpecMethod::Eagle}) {
    EXPECT_EQ(parse_spec_method(spec_method_name(m)), m);
  }
  try {
    parse_spec_method("hydra");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'hydra'"), std::string::npos);
  }
  EXPECT_EQ(default_spec_method(true), SpecMethod::Draft);
  EXPECT_EQ(default_spec_method(false), SpecMethod::Lookup);
}

TEST(ModelFreeOptions, BuildsTheRequestedDrafter) {
  ModelFreeOptions o;
  o.ngram_order = 3;
  auto ngram = make_model_free_drafter(SpecMethod::Ngram, o);
  EXPECT_EQ(ngram->name(), "ngram");
  EXPECT_EQ(static_cast<NgramDrafter&>(*ngram).config().max_order, 3);
  o.lookup_min = 1;
  o.lookup_max = 5;
  auto lookup = make_model_free_drafter(SpecMethod::Lookup, o);
  EXPECT_EQ(static_cast<PromptLookupDrafter&>(*lookup).config().lookup_max, 5);
  EXPECT_THROW(make_model_free_drafter(SpecMethod::Draft, o), Error);
  o.ngram_order = 1;
  EXPECT_THROW(make_model_free_drafter(SpecMethod::Ngram, o), Error);
  o.lookup_min = 6;
  EXPECT_THROW(make_model_free_drafter(SpecMethod::Lookup, o), Error);
}

TEST(ModelFreeOptions, LookupCacheFileLifeCycle) {
  const std::string path = specdec::testing::temp_dir() + "/options.ngc";
  std::remove(path.c_str());
  std::string warning;
  const std::vector<Token> text{5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6};
  {  // First run: no file yet, no warning; statistics saved at exit.
    LookupCacheFile file(path, 16, 99, ModelFreeOptions{}, &warning);
    EXPECT_TRUE(warning.empty());
    auto drafter = make_model_free_drafter(SpecMethod::Lookup, ModelFreeOptions{}, file.cache());
    drafter->begin(text);
    drafter->flush_to_cache();
    file.save();
  }
  {  // Second run drafts from the file.
    LookupCacheFile file(path, 16, 99, ModelFreeOptions{}, &warning);
    EXPECT_TRUE(warning.empty()) << warning;
    EXPECT_GT(file.cache()->n_contexts(), 0u);
    auto drafter = make_model_free_drafter(SpecMethod::Ngram, ModelFreeOptions{}, file.cache());
    const std::vector<Token> prompt{5, 6};
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    EXPECT_EQ(drafter->propose(prompt, 3, greedy).tokens, (std::vector<Token>{7, 8, 9}));
  }
  {  // A garbage file: a warning, empty statistics, and the next save replaces it.
    std::ofstream(path, std::ios::trunc) << std::string(100, 'x');
    LookupCacheFile file(path, 16, 99, ModelFreeOptions{}, &warning);
    EXPECT_NE(warning.find("bad magic"), std::string::npos) << warning;
    EXPECT_EQ(file.cache()->n_contexts(), 0u);
    file.save();
    LookupCacheFile again(path, 16, 99, ModelFreeOptions{}, &warning);
    EXPECT_TRUE(warning.empty()) << warning;
  }
}

}  // namespace
}  // namespace specdec
