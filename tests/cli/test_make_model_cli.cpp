// `specdec make-model --noisy-copy-of`: the stand-in draft of BENCHMARKS section 1, made by the
// program itself, drafts for its source with output identical to plain decoding; bad
// combinations of options are messages.
#include <gtest/gtest.h>

#include <string>

#include "common/cli_run.h"
#include "common/testing.h"
#include "specdec/gguf.h"

namespace specdec {
namespace {

using testing::run_cli;

TEST(CliMakeModel, NoisyCopyIsAWorkingDraftOfItsSource) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string noisy = testing::temp_dir() + "/cli-stories260K-noisy.gguf";
  auto made = run_cli("make-model --noisy-copy-of '" + model + "' --noise 0.1 --seed 1 -o '" + noisy + "' -t 2");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.err.find("noise 0.1"), std::string::npos) << made.err;
  auto source = GgufFile::open(model);
  auto copy = GgufFile::open(noisy);
  ASSERT_EQ(copy->tensors().size(), source->tensors().size());
  EXPECT_EQ(copy->get_string_array("tokenizer.ggml.tokens"), source->get_string_array("tokenizer.ggml.tokens"));
  const std::string args = " -p 'Once upon a time' -n 48 --temp 0 --no-display-prompt";
  auto plain = run_cli("generate -m '" + model + "' --spec none" + args);
  auto spec = run_cli("generate -m '" + model + "' -md '" + noisy + "' --no-adaptive --draft-max 4" + args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_NE(spec.err.find("accepted"), std::string::npos) << spec.err;
}

TEST(CliMakeModel, ShapeOrNoisyCopyExactlyOne) {
  SPECDEC_REQUIRE_CLI();
  const std::string out = testing::temp_dir() + "/cli-make-model-bad.gguf";
  auto neither = run_cli("make-model -o '" + out + "'");
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_NE(neither.err.find("exactly one of --shape"), std::string::npos) << neither.err;
  auto both = run_cli("make-model --shape tiny --noisy-copy-of x.gguf -o '" + out + "'");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("exactly one of --shape"), std::string::npos) << both.err;
  auto missing = run_cli("make-model --noisy-copy-of /nonexistent.gguf -o '" + out + "'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent.gguf"), std::string::npos) << missing.err;
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto negative = run_cli("make-model --noisy-copy-of '" + model + "' --noise -1 -o '" + out + "'");
  EXPECT_EQ(negative.exit_code, 1);
  EXPECT_NE(negative.err.find("noise scale"), std::string::npos) << negative.err;
}

}  // namespace
}  // namespace specdec
