// `specdec serve -md DRAFT` under concurrency (issue 7): the slots drafting with the draft model
// share each draft forward (spec/batched_draft.h), and that changes no output. Greedy requests
// equal `specdec generate`, next to slots using other methods (lookup, none) in the same steps;
// seeded sampled requests give the same text together as alone (their draft tokens and q are
// those of a lone drafter); the draft-model forwards per drafting iteration stay at most K.
#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "common/cli_run.h"
#include "common/testing.h"
#include "common/tiny_model.h"
#include "specdec/make_model.h"
#include "server_fixture.h"

namespace specdec::testing {
namespace {

const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog", "Lily and Ben went", "One day, a big"};

// A partly right draft model for stories260K (a noisy copy), made once per test process.
const std::string& noisy_draft(const std::string& target) {
  static const std::string path = [&] {
    const std::string p = temp_dir() + "/stories260K_noisy_draft.gguf";
    make_noisy_copy(target, p, 0.1f, 17);
    return p;
  }();
  return path;
}

std::string generate_text(const std::string& args, const std::string& prompt, int n) {
  auto r = run_cli("generate " + args + " -p '" + prompt + "' -n " + std::to_string(n) + " --temp 0 --no-display-prompt");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();  // generate ends with a newline
  return out;
}

// Posts all bodies at once; the replies in order.
std::vector<json> post_together(int port, const std::vector<json>& bodies) {
  std::vector<std::future<json>> futures;
  for (const json& body : bodies)
    futures.push_back(std::async(std::launch::async, [port, body] { return post_json(port, "/v1/completions", body); }));
  std::vector<json> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

double metric(int port, const std::string& name) {
  return metric_value(http_request(port, "GET", "/metrics").body, name);
}

constexpr int kDraftMax = 4;

TEST(ServerDraftModel, ConcurrentGreedyRequestsEqualGenerateAndShareDraftForwards) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(target, "models/stories260K.gguf");
  const std::string draft = noisy_draft(target);
  const std::string models = "-m '" + target + "' -md '" + draft + "'";
  std::vector<std::string> expected;
  for (const auto& p : kPrompts) expected.push_back(generate_text(models + " --spec none", p, 48));
  EXPECT_EQ(expected[0], generate_text(models + " --spec draft", kPrompts[0], 48));

  for (const bool batched : {true, false}) {
    SCOPED_TRACE(batched ? "batched drafting" : "--no-draft-batching");
    ServerProcess server(models + " --chat-template chatml --parallel 4 --draft-max " + std::to_string(kDraftMax) +
                         " --no-adaptive" + (batched ? "" : " --no-draft-batching"));
    ASSERT_TRUE(server.started()) << server.log();
    // Two draft-model slots, one lookup slot and one plain slot in the same steps.
    const std::vector<std::string> methods = {"draft", "draft", "lookup", "none"};
    for (int round = 0; round < 2; ++round) {
      std::vector<json> bodies;
      for (size_t i = 0; i < kPrompts.size(); ++i) {
        const std::string method = round == 0 ? "draft" : methods[i];
        bodies.push_back({{"prompt", kPrompts[i]}, {"max_tokens", 48}, {"temperature", 0}, {"speculative", {{"method", method}}}});
      }
      const std::vector<json> replies = post_together(server.port(), bodies);
      for (size_t i = 0; i < kPrompts.size(); ++i) {
        SCOPED_TRACE("round " + std::to_string(round) + ", prompt " + std::to_string(i));
        ASSERT_TRUE(replies[i].contains("choices")) << replies[i].dump();
        EXPECT_EQ(replies[i]["choices"][0]["text"], expected[i]);
        if (bodies[i]["speculative"]["method"] == "draft") {
          EXPECT_GT(replies[i]["timings"]["speculation"]["drafted"].get<int>(), 0) << replies[i].dump();
        }
      }
    }
    const double iterations = metric(server.port(), "specdec_draft_model_iterations_total");
    const double forwards = metric(server.port(), "specdec_draft_model_forwards_total");
    const double rows = metric(server.port(), "specdec_draft_model_rows_total");
    std::printf("%s: %.0f draft-model forwards (%.0f rows) in %.0f drafting iterations: %.2f forwards per iteration\n",
                batched ? "batched" : "alone", forwards, rows, iterations, forwards / std::max(iterations, 1.0));
    ASSERT_GT(iterations, 0);
    // Batched, each level of all chains is one forward: at most K per drafting iteration.
    if (batched) {
      EXPECT_LE(forwards, kDraftMax * iterations);
    }
  }
}

TEST(ServerDraftModel, SeededSampledRequestsGiveTheSameTextTogetherAsAlone) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(target, "models/stories260K.gguf");
  const std::string draft = noisy_draft(target);
  ServerProcess server("-m '" + target + "' -md '" + draft + "' --chat-template chatml --parallel 4 --draft-max 3 --no-adaptive");
  ASSERT_TRUE(server.started()) << server.log();
  std::vector<json> bodies;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    json body = {{"prompt", kPrompts[i]}, {"max_tokens", 40}, {"temperature", 0.6 + 0.2 * static_cast<double>(i)},
                 {"seed", 100 + i}};
    if (i == 1) body["top_k"] = 8;
    if (i == 2) body["presence_penalty"] = 0.7;
    bodies.push_back(body);
  }
  std::vector<std::string> alone;
  for (const json& body : bodies) alone.push_back(post_json(server.port(), "/v1/completions", body)["choices"][0]["text"]);
  const std::vector<json> together = post_together(server.port(), bodies);
  int drafted = 0, accepted = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    ASSERT_TRUE(together[i].contains("choices")) << together[i].dump();
    EXPECT_EQ(together[i]["choices"][0]["text"], alone[i]) << "a sampled request must not depend on its batch";
    drafted += together[i]["timings"]["speculation"]["drafted"].get<int>();
    accepted += together[i]["timings"]["speculation"]["accepted"].get<int>();
  }
  std::printf("sampled together: %d drafted, %d accepted\n", drafted, accepted);
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0) << "the noisy draft should be partly right";
  EXPECT_LT(accepted, drafted) << "and partly wrong (rejections exercised)";
}

}  // namespace
}  // namespace specdec::testing
