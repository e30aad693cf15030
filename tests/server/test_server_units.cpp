// Unit tests of the server's scheduling and text pieces (no HTTP).
#include <gtest/gtest.h>

#include "common/testing.h"
#include "server/load_aware_k.h"
#include "specdec/text_stream.h"
#include "specdec/gguf.h"
#include "specdec/tokenizer.h"

namespace specdec::server {
namespace {

// A CPU-like cost curve: memory bound (flat) up to 16 rows, then compute bound (linear).
double forward_seconds(int n_rows) { return 1e-3 * std::max(1.0, n_rows / 16.0); }

// Feeds the controller what a batch of n_seqs sequences would measure, for n_iterations.
void simulate(LoadAwareK& k, int n_seqs, int k_max, double alpha, int n_iterations) {
  for (int it = 0; it < n_iterations; ++it) {
    const int chosen = k.choose(n_seqs, k_max);
    k.observe_forward(n_seqs * (chosen + 1), forward_seconds(n_seqs * (chosen + 1)));
    if (chosen > 0) {
      k.observe_draft(n_seqs * chosen, n_seqs * chosen * 2e-6);
      // Deterministic acceptance pattern with rate ~alpha per position.
      for (int s = 0; s < n_seqs; ++s) {
        int accepted = 0;
        while (accepted < chosen && ((it * 7 + s * 13 + accepted * 29) % 100) < alpha * 100) ++accepted;
        k.observe_acceptance(chosen, accepted);
      }
    }
  }
}

TEST(LoadAwareK, DraftsLongAloneAndShrinksUnderLoad) {
  LoadAwareK alone(16);
  simulate(alone, 1, 8, 0.8, 200);
  int k_alone = 0;
  for (int i = 0; i < 10; ++i) k_alone = std::max(k_alone, alone.choose(1, 8));
  LoadAwareK busy(16);
  simulate(busy, 32, 8, 0.8, 200);
  int k_busy = 8;
  for (int i = 0; i < 10; ++i) k_busy = std::min(k_busy, std::max(busy.choose(32, 8), 0));
  std::printf("K alone = %d, K with 32 sequences = %d\n", k_alone, k_busy);
  EXPECT_GE(k_alone, 4) << "one sequence: verification is nearly free, draft long";
  EXPECT_LE(k_busy, 1) << "32 sequences: the forward is compute bound, drafts stop paying";
  EXPECT_GT(alone.predicted_rate(1, k_alone), alone.predicted_rate(1, 0));
}

TEST(LoadAwareK, ExploresWhileAtZeroAndResumesDraftingWhenAcceptanceReturns) {
  // One sequence, drafts costing 0.1 of a forward: drafting pays only with real acceptance.
  LoadAwareK k(/*probe_interval=*/1000, /*max_rows=*/2048, /*explore_interval=*/8);
  auto step = [&](bool accept) {  // one iteration; every drafted token accepted iff accept
    const int chosen = k.choose(1, 8);
    k.observe_forward(chosen + 1, forward_seconds(chosen + 1));
    if (chosen > 0) {
      k.observe_draft(chosen, chosen * 1e-4);
      k.observe_acceptance(chosen, accept ? chosen : 0);
    }
    return chosen;
  };
  for (int i = 0; i < 100; ++i) step(false);  // nothing is ever accepted: K* = 0
  int n_explore = 0;
  for (int i = 0; i < 64; ++i) {
    const int chosen = step(false);
    EXPECT_LE(chosen, 1) << "no acceptance: only exploration drafts, one token";
    n_explore += chosen > 0;
  }
  EXPECT_EQ(n_explore, 8) << "one K = 1 iteration per 8";
  // The text starts repeating: exploration drafts are accepted and K grows again.
  int k_max_seen = 0;
  for (int i = 0; i < 200 && k_max_seen < 4; ++i) k_max_seen = std::max(k_max_seen, step(true));
  EXPECT_GE(k_max_seen, 4) << "acceptance came back, K did not";
}

TEST(LoadAwareK, ProbesWithAPlainIterationAndRespectsKMax) {
  LoadAwareK k(4);
  int n_zero = 0;
  for (int i = 0; i < 8; ++i) {
    const int chosen = k.choose(2, 3);
    EXPECT_LE(chosen, 3);
    n_zero += chosen == 0;
    EXPECT_EQ(k.last_k(), chosen);
  }
  EXPECT_EQ(n_zero, 2) << "every 4th iteration is a plain probe";
  EXPECT_EQ(k.choose(2, 0), 0);
  EXPECT_EQ(k.choose(0, 5), 0);
}

TEST(TextStream, HoldsBackStopPrefixesAndCutsTheStop) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto gguf = GgufFile::open(model);
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  // SentencePiece encodes a leading space (add_space_prefix); resumed text keeps it.
  const std::vector<Token> tokens = tokenizer->encode("there was a little girl named Lily.", false);
  TextStream stream(*tokenizer, {"girl named", "zzz"}, /*resume=*/true);
  std::string released;
  bool ended = false;
  for (Token t : tokens) {
    std::string piece;
    ended = stream.push(t, &piece);
    EXPECT_EQ(piece.find("girl"), std::string::npos) << "a possible stop prefix was released: " << piece;
    released += piece;
    if (ended) break;
  }
  EXPECT_TRUE(ended);
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(released, " there was a little ");
  EXPECT_EQ(stream.text(), released);
  std::string more;
  stream.finish(&more);
  EXPECT_EQ(more, "");
}

TEST(TextStream, EndOfGenerationReleasesWhatWasHeld) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto gguf = GgufFile::open(model);
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  TextStream stream(*tokenizer, {"Lily."}, /*resume=*/true);
  std::string released;
  for (Token t : tokenizer->encode("named Lil", false)) EXPECT_FALSE(stream.push(t, &released));
  EXPECT_EQ(released.find("Lil"), std::string::npos) << released;
  EXPECT_TRUE(stream.push(tokenizer->special().eos, &released));
  stream.finish(&released);
  EXPECT_EQ(released, " named Lil");
  EXPECT_FALSE(stream.stopped());
}

}  // namespace
}  // namespace specdec::server
