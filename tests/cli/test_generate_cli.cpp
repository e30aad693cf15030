// `specdec generate` as a user runs it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "common/cli_run.h"
#include "common/testing.h"

namespace specdec {
namespace {

using testing::run_cli;

std::string golden_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.rfind("<s> ", 0) == 0 ? s.substr(4) : s;  // llama-simple renders BOS as "<s> "
}

TEST(CliGenerate, GreedyStories260KMatchesLlamaCppGolden) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  SPECDEC_FIXTURE(golden, "models/stories260K.greedy.once-upon-a-time.txt");
  auto r = run_cli("generate -m '" + model + "' -p 'Once upon a time' -n 120 --temp 0 --spec none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden_text(golden));
  EXPECT_NE(r.err.find("prompt 5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("generated 120 tokens"), std::string::npos) << r.err;
  // The stats line: prompt and generated counts, prefill and decode speeds (positive numbers).
  const std::regex speeds(R"(prefill ([0-9.]+) tok/s.*decode ([0-9.]+) tok/s)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, speeds)) << r.err;
  EXPECT_GT(std::stod(m[1].str()), 0.0) << r.err;
  EXPECT_GT(std::stod(m[2].str()), 0.0) << r.err;
  EXPECT_EQ(r.out.find("<s>"), std::string::npos) << "BOS must never be printed";
}

TEST(CliGenerate, CountOptionsNameTheBadValueAndTheBound) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  for (const auto& [value, shown] : {std::pair<std::string, std::string>{"0", "got 0"},
                                     {"-3", "got -3"}, {"lots", "got 'lots'"}, {"4x", "got '4x'"}}) {
    auto r = run_cli("generate -m '" + model + "' -p 'Once' -n " + value);
    EXPECT_NE(r.exit_code, 0) << value;
    const std::string text = r.err + r.out;
    EXPECT_NE(text.find("--n-predict"), std::string::npos) << text;
    EXPECT_NE(text.find("must be an integer >= 1, " + shown), std::string::npos) << text;
    EXPECT_EQ(text.find("1797693"), std::string::npos) << "no 1.8e308 range in the message: " << text;
  }
}

TEST(CliGenerate, ConvertedLlama2cCheckpointGeneratesTheSameText) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(bin, "models/stories260K.bin");
  SPECDEC_FIXTURE(tok, "models/tok512.bin");
  SPECDEC_FIXTURE(golden, "models/stories260K.greedy.once-upon-a-time.txt");
  const std::string out = testing::temp_dir() + "/converted-stories260K.gguf";
  auto c = run_cli("convert-llama2c --model '" + bin + "' --tokenizer '" + tok + "' -o '" + out + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err << c.out;
  auto r = run_cli("generate -m '" + out + "' -p 'Once upon a time' -n 120 --temp 0 --spec none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden_text(golden));
}

TEST(CliGenerate, SpeculativeCompareReportsIdenticalOutputAndStats) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  for (const char* spec : {"lookup", "ngram"}) {
    auto r = run_cli("generate -m '" + model + "' -p 'Once upon a time' -n 60 --temp 0 --spec " + spec +
                     " --compare-plain --draft-max 4");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("acceptance"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tokens/pass"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("speedup over plain decoding"), std::string::npos) << r.err;
  }
  // The draft model option is spelled -md as in llama.cpp; the model itself as its own draft.
  // A fixed K: the adaptive rule rightly never drafts with a draft as costly as the target.
  auto r = run_cli("generate -m '" + model + "' -md '" + model +
                   "' -p 'Once upon a time' -n 40 --temp 0 --compare-plain --no-adaptive");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("drafter draft-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("acceptance 1.000"), std::string::npos) << "a model drafting for itself is always accepted:\n" << r.err;
  EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;
}

TEST(CliGenerate, UserErrorsAreMessagesNotCrashes) {
  SPECDEC_REQUIRE_CLI();
  auto r = run_cli("generate -m /nonexistent/model.gguf -p hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  r = run_cli("generate -m '" + model + "' -p 'Once upon a time' -c 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not fit the context of 4 tokens"), std::string::npos) << r.err;
  r = run_cli("generate -m '" + model + "' -p hi --temp -1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--temp"), std::string::npos) << r.err;
  r = run_cli("generate -m '" + model + "' -p hi --spec bogus");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace specdec
