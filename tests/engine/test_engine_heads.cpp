// The engine's --spec medusa|eagle --heads FILE: greedy text identical to plain decoding with
// random heads (including the stop/rollback path of the engine), and clear errors without a
// heads file or with one for another target.
#include <gtest/gtest.h>

#include <string>

#include "spec/heads_setup.h"
#include "specdec/engine.h"
#include "specdec/error.h"

namespace specdec {
namespace {

EngineOptions heads_options(const std::string& model, const char* method, const std::string& heads) {
  EngineOptions o;
  o.model_path = model;
  o.method = parse_spec_method(method);
  o.heads_path = heads;
  o.n_threads = 1;
  o.spec.draft_max = 6;
  o.spec.adaptive = false;
  return o;
}

TEST(EngineHeads, GreedyTextEqualsPlainWithMedusaAndEagle) {
  const std::string model = testing::tiny_trio().target;
  const auto& files = testing::tiny_heads();
  GenerateRequest request;
  request.prompt = "the cat sat on the mat";
  request.max_tokens = 24;
  request.sampling.temperature = 0.0f;
  Engine plain(heads_options(model, "none", ""));
  const GenerateResult expected = plain.generate(request);
  for (const auto& [method, file] : {std::pair<const char*, std::string>{"medusa", files.medusa}, {"eagle", files.eagle}}) {
    Engine engine(heads_options(model, method, file));
    const GenerateResult got = engine.generate(request);
    EXPECT_EQ(got.tokens, expected.tokens) << method;
    EXPECT_EQ(got.drafter_name, method);
    EXPECT_GT(got.stats.n_drafted, 0) << method;
    // A stop string inside the output exercises the decoder's rollback with the drafter.
    if (expected.text.size() > 4) {
      GenerateRequest stopping = request;
      stopping.stop = {expected.text.substr(expected.text.size() / 2, 2)};
      EXPECT_EQ(engine.generate(stopping).text, plain.generate(stopping).text) << method;
    }
  }
}

TEST(EngineHeads, MissingOrForeignHeadsAreErrors) {
  const std::string model = testing::tiny_trio().target;
  for (const char* method : {"medusa", "eagle"}) {
    try {
      Engine engine(heads_options(model, method, ""));
      ADD_FAILURE() << method << " without --heads";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--heads"), std::string::npos) << e.what();
    }
  }
  // Heads made for the 8-token micro target do not fit the tiny target.
  EXPECT_THROW(Engine(heads_options(model, "medusa", testing::micro_heads().medusa)), Error);
  EXPECT_THROW(Engine(heads_options(model, "eagle", testing::micro_heads().eagle)), Error);
}

}  // namespace
}  // namespace specdec
