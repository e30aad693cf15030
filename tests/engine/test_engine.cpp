// Engine: golden generation, speculative == plain under greedy, stops and max_tokens cutting
// inside accepted runs, streaming pieces, bad requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/testing.h"
#include "engine/engine_requests.h"
#include "common/tiny_model.h"
#include "specdec/engine.h"
#include "specdec/error.h"

namespace specdec {
namespace {

using testing::greedy;
using testing::kRepetitive;
using testing::options_for;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Engine, GreedyGoldenStories260K) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  SPECDEC_FIXTURE(golden_path, "models/stories260K.greedy.once-upon-a-time.txt");
  Engine engine(options_for(model, "none", 2));
  GenerateRequest request = greedy("Once upon a time", 120);
  auto result = engine.generate(request);
  ASSERT_EQ(result.n_prompt_tokens, 5);
  EXPECT_EQ(result.tokens.size(), 120u);
  std::string golden = read_text(golden_path);
  ASSERT_EQ(golden.rfind("<s> ", 0), 0u);
  golden = golden.substr(4);
  while (!golden.empty() && golden.back() == '\n') golden.pop_back();
  EXPECT_EQ("Once upon a time" + result.text, golden);
}

TEST(Engine, GeneratedTextKeepsTheSpaceAfterThePrompt) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  Engine engine(options_for(model, "none", 2));
  // The golden continuation of "Once upon a" starts with " time": its space must survive.
  auto result = engine.generate(greedy("Once upon a", 3));
  ASSERT_FALSE(result.text.empty());
  EXPECT_EQ(result.text[0], ' ') << result.text;
  EXPECT_EQ(result.text.substr(0, 5), " time") << result.text;
}

TEST(Engine, SpeculativeGreedyEqualsPlainForEveryModelFreeMethod) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  for (const char* method : {"lookup", "ngram"}) {
    Engine engine(options_for(model, method, 2));
    for (const char* prompt : {"Once upon a time", kRepetitive, "The cat", "One day, Tom"}) {
      GenerateRequest request = greedy(prompt, 60);
      request.speculative = false;
      auto plain = engine.generate(request);
      request.speculative = true;
      auto spec = engine.generate(request);
      EXPECT_EQ(spec.tokens, plain.tokens) << method << " / " << prompt;
      EXPECT_EQ(spec.text, plain.text);
    }
  }
}

TEST(Engine, MaxTokensAndStopStringsInsideAcceptedRuns) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  EngineOptions o = options_for(model, "lookup", 2);
  o.spec.adaptive = false;  // draft every step: the adaptive rule drafts only when it pays
  Engine engine(o);
  GenerateRequest request = greedy(kRepetitive, 40);
  request.speculative = false;
  auto plain = engine.generate(request);
  ASSERT_GE(plain.tokens.size(), 20u);
  // max_tokens at every length: the speculative run must emit exactly the plain prefix.
  for (int n = 1; n <= 20; ++n) {
    GenerateRequest r = request;
    r.max_tokens = n;
    r.speculative = true;
    auto spec = engine.generate(r);
    ASSERT_EQ(spec.tokens.size(), static_cast<size_t>(n));
    EXPECT_TRUE(std::equal(spec.tokens.begin(), spec.tokens.end(), plain.tokens.begin())) << "n=" << n;
    EXPECT_EQ(spec.finish, FinishReason::Length);
  }
  {
    GenerateRequest r = request;
    r.speculative = true;
    auto spec = engine.generate(r);
    EXPECT_GT(spec.stats.n_accepted, 3) << "the repetitive prompt must give accepted runs to cut inside";
    EXPECT_EQ(spec.tokens, plain.tokens);
  }
  // Stop strings at several places of the plain text.
  for (size_t cut : {size_t(3), plain.text.size() / 3, plain.text.size() / 2}) {
    const std::string stop = plain.text.substr(cut, 4);
    const size_t first = plain.text.find(stop);
    GenerateRequest r = request;
    r.stop = {stop};
    r.speculative = true;
    std::string streamed;
    auto spec = engine.generate(r, [&](const StreamPiece& piece) {
      streamed += piece.text;
      return true;
    });
    EXPECT_EQ(spec.finish, FinishReason::Stop) << stop;
    EXPECT_EQ(spec.text, plain.text.substr(0, first)) << stop;
    EXPECT_EQ(streamed, spec.text) << "streamed text must equal the result, stop string excluded";
    // The state after a stop is consistent: the next request equals a fresh run.
    auto again = engine.generate(request);
    EXPECT_EQ(again.tokens, plain.tokens);
  }
}

TEST(Engine, EosInsideAnAcceptedRunEndsLikePlainDecoding) {
  // Copies of stories260K whose EOS is a token the greedy continuation emits mid-text: the
  // engine's end-of-generation check (not a test helper) must end speculative decoding exactly
  // where plain decoding ends, also when the EOS is an accepted draft token with accepted
  // tokens after it in the same step.
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  GenerateRequest request = greedy(kRepetitive, 40);
  request.speculative = false;
  const auto original = Engine(options_for(model, "none", 2)).generate(request);
  ASSERT_EQ(original.finish, FinishReason::Length);
  int n_cut_after_eos = 0, n_candidates = 0;
  for (size_t j = 4; j < original.tokens.size() && n_candidates < 6; ++j) {
    const Token eos = original.tokens[j];
    if (std::find(original.tokens.begin(), original.tokens.begin() + static_cast<long>(j), eos) !=
        original.tokens.begin() + static_cast<long>(j)) {
      continue;  // not its first occurrence
    }
    ++n_candidates;
    const std::string edited = testing::temp_dir() + "/stories260K-eos" + std::to_string(eos) + ".gguf";
    testing::write_edited_copy(model, edited, [&](GgufWriter& w) {
      w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
    });
    EngineOptions o = options_for(edited, "lookup", 2);
    o.spec.adaptive = false;  // draft every step
    o.spec.draft_max = 8;
    Engine engine(o);
    const auto plain = engine.generate(request);
    ASSERT_EQ(plain.finish, FinishReason::Stop) << "eos " << eos;
    ASSERT_EQ(plain.tokens.size(), j + 1) << "plain decoding ends on the first EOS, which it keeps";
    GenerateRequest r = request;
    r.speculative = true;
    const auto spec = engine.generate(r);
    EXPECT_EQ(spec.tokens, plain.tokens) << "eos " << eos;
    EXPECT_EQ(spec.text, plain.text) << "eos " << eos;
    EXPECT_EQ(spec.finish, FinishReason::Stop) << "eos " << eos;
    // The decoder emitted tokens past the EOS in its last step: they were cut.
    if (spec.stats.n_emitted > static_cast<int64_t>(spec.tokens.size())) ++n_cut_after_eos;
    // The engine is consistent afterwards: the next request equals a fresh run.
    EXPECT_EQ(engine.generate(r).tokens, plain.tokens);
  }
  EXPECT_GE(n_candidates, 3);
  EXPECT_GT(n_cut_after_eos, 0) << "no EOS fell inside an accepted run: the test exercised nothing";
}

TEST(Engine, StreamedPiecesConcatenateToTheTextAndAreValidUtf8) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  Engine engine(options_for(model, "ngram", 2));
  GenerateRequest request = greedy("Once upon a time", 80);
  request.stop = {"zzzz"};  // never matches, but forces hold-back logic
  std::string streamed;
  auto result = engine.generate(request, [&](const StreamPiece& piece) {
    // A piece never ends inside a multi-byte sequence.
    size_t i = 0;
    while (i < piece.text.size()) {
      unsigned char c = static_cast<unsigned char>(piece.text[i]);
      size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
      EXPECT_LE(i + len, piece.text.size());
      i += len;
    }
    streamed += piece.text;
    return true;
  });
  EXPECT_EQ(streamed, result.text);
}

TEST(Engine, CancelStopsGeneration) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  Engine engine(options_for(model, "lookup", 2));
  int n_pieces = 0;
  auto result = engine.generate(greedy("Once upon a time", 100), [&](const StreamPiece&) { return ++n_pieces < 3; });
  EXPECT_EQ(result.finish, FinishReason::Cancelled);
  EXPECT_LT(result.tokens.size(), 100u);
}

TEST(Engine, ContextFullStopsWithReason) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  EngineOptions o = options_for(model, "lookup", 2);
  o.n_ctx = 48;
  Engine engine(o);
  auto result = engine.generate(greedy(kRepetitive, 100));
  EXPECT_EQ(result.finish, FinishReason::ContextFull);
  EXPECT_EQ(result.n_prompt_tokens + static_cast<int>(result.tokens.size()), 48);
  GenerateRequest plain = greedy(kRepetitive, 100);
  plain.speculative = false;
  auto reference = engine.generate(plain);
  EXPECT_EQ(result.tokens, reference.tokens);
}

TEST(Engine, BadRequestsNameTheProblem) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  EngineOptions o = options_for(model, "none", 2);
  o.n_ctx = 16;
  Engine engine(o);
  GenerateRequest r = greedy(std::string(200, 'a'), 4);
  try {
    engine.generate(r);
    FAIL() << "a prompt longer than the context must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the context of 16"), std::string::npos) << e.what();
  }
  r = greedy("hi", 0);
  EXPECT_THROW(engine.generate(r), Error);
  EngineOptions too_long = options_for(model, "none", 2);
  too_long.n_ctx = 100000;
  try {
    Engine bad(too_long);
    FAIL() << "-c larger than the model's context must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the model's 128"), std::string::npos) << e.what();
  }
  EngineOptions needs_draft = options_for(model, "draft", 2);
  EXPECT_THROW(Engine{needs_draft}, Error);
}

}  // namespace
}  // namespace specdec
