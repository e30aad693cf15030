// logprobs / top_logprobs against an independent computation: the server's reported values
// must be the log-softmax of the target's raw logits (Transformer::forward in this process), not
// of the distribution after the request's sampling transform (see docs/DESIGN.md, "Server").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/testing.h"
#include "server_fixture.h"
#include "specdec/model.h"
#include "specdec/tokenizer.h"

namespace specdec::testing {
namespace {

// (n_rows, n_vocab) log-softmax, in double, of each row of `logits`.
std::vector<std::vector<double>> log_softmax_rows(const Logits& logits) {
  std::vector<std::vector<double>> out;
  for (int r = 0; r < logits.n_rows(); ++r) {
    const float* x = logits.row(r);  // (n_vocab)
    const double max_x = *std::max_element(x, x + logits.n_vocab);
    double sum = 0.0;
    for (int i = 0; i < logits.n_vocab; ++i) sum += std::exp(static_cast<double>(x[i]) - max_x);
    std::vector<double> row(static_cast<size_t>(logits.n_vocab));
    for (int i = 0; i < logits.n_vocab; ++i) row[static_cast<size_t>(i)] = x[i] - max_x - std::log(sum);
    out.push_back(std::move(row));
  }
  return out;
}

// Runs the prompt + generated tokens through the target as one chain and returns the
// log-softmax of each row that predicts a generated token (row i predicts generated[i]).
std::vector<std::vector<double>> reference_logprobs(Transformer& model, const std::vector<Token>& prompt,
                                                    const std::vector<Token>& generated) {
  std::vector<Token> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  KvCache cache = model.new_cache(static_cast<int>(all.size()) + 1);
  Batch batch;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool predicts_generated = i + 1 >= prompt.size() && i + 1 < all.size();
    batch.add(all[i], static_cast<int32_t>(i), i == 0 ? -1 : static_cast<int32_t>(i - 1), 0, predicts_generated);
  }
  Logits logits;
  KvCache* caches[] = {&cache};
  model.forward(batch, caches, logits);
  return log_softmax_rows(logits);  // (n_generated, n_vocab)
}

TEST(ServerLogprobs, ChosenAndTopLogprobsAreTheRawTargetSoftmax) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --spec none -t 1");
  auto model = Transformer::load(server_model, ModelOptions{1});
  auto tokenizer = Tokenizer::from_gguf(model->gguf());
  std::map<std::string, std::vector<Token>> ids_of_piece;  // token text -> ids with that text
  for (Token id = 0; id < tokenizer->n_vocab(); ++id) ids_of_piece[tokenizer->token_to_piece(id)].push_back(id);

  const std::string prompt = "Once upon a time";
  const std::vector<Token> prompt_ids = tokenizer->encode(prompt, /*add_special=*/true);
  // A transform that changes the sampled distribution a lot (hot, truncated, penalised): the
  // reported values must not depend on it.
  const int n = 16;
  json body = {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 1.7}, {"top_k", 4}, {"presence_penalty", 1.5},
               {"seed", 1234}, {"logprobs", 3}, {"logit_bias", {{"2", -100}}}};
  json r = post_json(server.port(), "/v1/completions", body);
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), static_cast<size_t>(n)) << r.dump();

  // Recover the generated ids from the token texts; where several ids share a text, the one the
  // reference agrees with (the context of later rows then uses it).
  std::vector<Token> generated;
  for (int i = 0; i < n; ++i) {
    const std::string text = lp["tokens"][i].get<std::string>();
    ASSERT_TRUE(ids_of_piece.count(text)) << "no token with text '" << text << "'";
    std::vector<Token> candidates = ids_of_piece[text];
    generated.push_back(candidates[0]);
    if (candidates.size() > 1) {
      const auto rows = reference_logprobs(*model, prompt_ids, generated);
      const double reported = lp["token_logprobs"][i].get<double>();
      for (Token c : candidates)
        if (std::abs(rows[static_cast<size_t>(i)][static_cast<size_t>(c)] - reported) < 1e-4) generated.back() = c;
    }
  }
  const auto rows = reference_logprobs(*model, prompt_ids, generated);
  bool any_not_top = false;
  for (int i = 0; i < n; ++i) {
    const std::vector<double>& row = rows[static_cast<size_t>(i)];  // (n_vocab)
    const double reported = lp["token_logprobs"][i].get<double>();
    EXPECT_NEAR(reported, row[static_cast<size_t>(generated[static_cast<size_t>(i)])], 1e-4) << "token " << i;
    // top_logprobs: the 3 largest raw log-probabilities, each with its value.
    std::vector<Token> order(row.size());
    for (size_t t = 0; t < order.size(); ++t) order[t] = static_cast<Token>(t);
    std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                      [&](Token a, Token b) { return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)]; });
    const json& top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 3u) << top.dump();
    for (int k = 0; k < 3; ++k) {
      const std::string text = tokenizer->token_to_piece(order[static_cast<size_t>(k)]);
      ASSERT_TRUE(top.contains(text)) << "top " << k << " '" << text << "' missing at token " << i << ": " << top.dump();
      EXPECT_NEAR(top[text].get<double>(), row[static_cast<size_t>(order[static_cast<size_t>(k)])], 1e-4);
    }
    any_not_top = any_not_top || generated[static_cast<size_t>(i)] != order[0];
  }
  // At temperature 1.7 some sampled token is not the argmax: the test saw a non-greedy choice.
  EXPECT_TRUE(any_not_top);
}

}  // namespace
}  // namespace specdec::testing
