// `specdec serve` endpoints against the real program and the stories260K model.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/cli_run.h"
#include "common/testing.h"
#include "server_fixture.h"

namespace specdec::testing {
namespace {

const char* kStory = "Once upon a time";

// `specdec generate` output for a greedy request (the continuation only).
std::string generate_text(const std::string& model, const std::string& prompt, int n, const std::string& spec) {
  auto r = run_cli("generate -m '" + model + "' -p '" + prompt + "' -n " + std::to_string(n) +
                   " --temp 0 --no-display-prompt --spec " + spec);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();  // generate ends with a newline
  return out;
}

TEST(ServerApi, SamplingFieldsReachTheSamplerAsInGenerate) {
  // Every sampling field changes the output exactly as the same option of `specdec generate`
  // does: penalties under greedy decoding, and seeded sampling with top_k / top_p / min_p
  // (speculation off, so both consume the random stream the same way).
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 2");
  const auto text_of = [&](json body) {
    body["prompt"] = kStory;
    body["max_tokens"] = 40;
    HttpResponse raw;
    json r = post_json(server.port(), "/v1/completions", body, &raw);
    EXPECT_EQ(raw.status, 200) << raw.body;
    return r["choices"][0]["text"].get<std::string>();
  };
  const auto cli_text = [&](const std::string& options) {
    auto r = run_cli("generate -m '" + server_model + "' -p '" + kStory + "' -n 40 --no-display-prompt " + options);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.size() - (!r.out.empty() && r.out.back() == '\n' ? 1 : 0));
  };
  const std::string greedy = cli_text("--temp 0 --spec none");
  const std::string penalised = text_of({{"temperature", 0}, {"frequency_penalty", 1.0}, {"presence_penalty", 0.5},
                                         {"speculative", {{"method", "lookup"}, {"p_min", 0.9}}}});
  EXPECT_NE(penalised, greedy) << "the penalties changed nothing";
  EXPECT_EQ(penalised, cli_text("--temp 0 --frequency-penalty 1.0 --presence-penalty 0.5 --spec none"));
  const std::string sampled =
      text_of({{"temperature", 0.9}, {"top_k", 20}, {"top_p", 0.95}, {"min_p", 0.05}, {"seed", 42}, {"speculative", {{"method", "none"}}}});
  EXPECT_EQ(sampled, cli_text("--temp 0.9 --top-k 20 --top-p 0.95 --min-p 0.05 -s 42 --spec none"));
  EXPECT_NE(sampled, greedy);
}

TEST(ServerApi, HealthModelsMetrics) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 2");
  HttpResponse health = http_request(server.port(), "GET", "/health");
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body)["status"], "ok");
  HttpResponse models = http_request(server.port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  json m = json::parse(models.body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "stories260K.gguf");
  EXPECT_EQ(m["data"][0]["meta"]["chat_template"], "chatml");
  HttpResponse metrics = http_request(server.port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.headers["content-type"].find("text/plain"), std::string::npos);
  for (const char* name : {"specdec_slots_total", "specdec_queue_length", "specdec_draft_k_current",
                           "specdec_generated_tokens_total", "specdec_draft_tokens_total"})
    EXPECT_GE(metric_value(metrics.body, name), 0) << name << " missing:\n" << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "specdec_slots_total"), 2);
  EXPECT_NE(metrics.body.find("# TYPE specdec_time_to_first_token_seconds histogram"), std::string::npos);
  // After one greedy completion with K = 4 on a prompt that prompt lookup drafts well: the
  // counters add up to what the response reported.
  const char* repetitive = "Lily saw a big red ball. She wanted to play with the ball. Lily saw a big red ball. She wanted to";
  HttpResponse raw;
  json r = post_json(server.port(), "/v1/completions",
                     {{"prompt", repetitive}, {"max_tokens", 40}, {"temperature", 0},
                      {"speculative", {{"method", "lookup"}, {"draft_min", 4}, {"draft_max", 4}}}},
                     &raw);
  ASSERT_EQ(raw.status, 200) << raw.body;
  const std::string after = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(after, "specdec_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), 1) << after;
  EXPECT_EQ(metric_value(after, "specdec_prompt_tokens_total"), r["usage"]["prompt_tokens"].get<double>());
  EXPECT_EQ(metric_value(after, "specdec_generated_tokens_total"), r["usage"]["completion_tokens"].get<double>());
  EXPECT_EQ(metric_value(after, "specdec_draft_tokens_total"), r["timings"]["speculation"]["drafted"].get<double>());
  EXPECT_EQ(metric_value(after, "specdec_draft_tokens_accepted_total"), r["timings"]["speculation"]["accepted"].get<double>());
  EXPECT_EQ(metric_value(after, "specdec_generations_total{finish_reason=\"length\"}"), 1);
  EXPECT_GT(r["timings"]["speculation"]["drafted"].get<int>(), 0) << raw.body;
  EXPECT_GE(metric_value(after, "specdec_draft_acceptance_by_position{position=\"1\"}"), 0) << after;
  EXPECT_EQ(metric_value(after, "specdec_time_per_output_token_seconds_count"), 1) << after;
}

TEST(ServerApi, GreedyCompletionEqualsGenerate) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 2");
  const std::string expected = generate_text(server_model, kStory, 60, "lookup");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(expected, generate_text(server_model, kStory, 60, "none"));
  for (const char* method : {"none", "lookup", "ngram"}) {
    SCOPED_TRACE(method);
    json body = {{"model", "stories260K.gguf"}, {"prompt", kStory},           {"max_tokens", 60},
                 {"temperature", 0},            {"speculative", {{"method", method}}}};
    HttpResponse raw;
    json r = post_json(server.port(), "/v1/completions", body, &raw);
    ASSERT_EQ(raw.status, 200) << raw.body;
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["choices"][0]["text"], expected);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
    EXPECT_EQ(r["usage"]["completion_tokens"], 60);
    EXPECT_EQ(r["usage"]["total_tokens"], 65);
    EXPECT_EQ(r["timings"]["speculation"]["method"], method);
    EXPECT_TRUE(r["timings"]["speculation"].contains("acceptance_rate"));
    EXPECT_TRUE(r["timings"]["speculation"].contains("tokens_per_target_pass"));
    // Streaming gives the same text, in several chunks, ending with [DONE].
    body["stream"] = true;
    HttpResponse s = http_request(server.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(s.status, 200);
    EXPECT_NE(s.headers["content-type"].find("text/event-stream"), std::string::npos);
    StreamResult stream = parse_stream(s.body);
    EXPECT_TRUE(stream.done && !stream.garbled) << s.body;
    EXPECT_EQ(stream.text, expected);
    EXPECT_GT(stream.n_chunks, 1);
    EXPECT_EQ(stream.finish_reason, "length");
  }
}

TEST(ServerApi, ChatCompletionStreamingAndNot) {
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  json body = {{"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", kStory}}}},
               {"max_tokens", 30},
               {"temperature", 0}};
  HttpResponse raw;
  json r = post_json(server.port(), "/v1/chat/completions", body, &raw);
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  const std::string text = r["choices"][0]["message"]["content"];
  EXPECT_FALSE(text.empty());
  // The prompt is the ChatML rendering of both messages.
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 20);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  HttpResponse s = http_request(server.port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(s.status, 200);
  StreamResult stream = parse_stream(s.body);
  EXPECT_TRUE(stream.done && !stream.garbled) << s.body;
  EXPECT_EQ(stream.text, text);
  EXPECT_EQ(stream.usage["completion_tokens"], r["usage"]["completion_tokens"]);
  EXPECT_EQ(stream.final_chunk["object"], "chat.completion.chunk");
  EXPECT_TRUE(stream.final_chunk.contains("timings"));
  // The first chunk carries the role.
  EXPECT_NE(s.body.find("\"role\":\"assistant\""), std::string::npos);
}

TEST(ServerApi, StopStringsAreCutAndNeverStreamed) {
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  const std::string full = generate_text(server_model, kStory, 40, "none");
  // A stop string from the middle of the greedy continuation.
  const size_t at = full.find("Lily");
  ASSERT_NE(at, std::string::npos) << full;
  json body = {{"prompt", kStory}, {"max_tokens", 40}, {"temperature", 0}, {"stop", {"zzz", "Lily"}}};
  json r = post_json(server.port(), "/v1/completions", body);
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, at));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  StreamResult stream = parse_stream(http_request(server.port(), "POST", "/v1/completions", body.dump()).body);
  EXPECT_EQ(stream.text, full.substr(0, at));
  EXPECT_EQ(stream.finish_reason, "stop");
}

TEST(ServerApi, LogprobsComeFromTheTargetDistribution) {
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  json body = {{"prompt", kStory}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 3}};
  json r = post_json(server.port(), "/v1/completions", body);
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u) << r.dump();
  std::string joined;
  for (size_t i = 0; i < 12; ++i) {
    const double chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0);
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u);
    double best = -1e30;
    for (const auto& [token, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    EXPECT_DOUBLE_EQ(chosen, best) << "greedy picks the most probable token";
    joined += lp["tokens"][i].get<std::string>();
  }
  EXPECT_NE(joined.find(r["choices"][0]["text"].get<std::string>().substr(1)), std::string::npos);
  json chat = {{"messages", {{{"role", "user"}, {"content", kStory}}}},
               {"max_tokens", 5}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  json c = post_json(server.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(c["choices"][0]["logprobs"]["content"].size(), 5u) << c.dump();
  EXPECT_EQ(c["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
}

TEST(ServerApi, SeededSamplingIsReproducible) {
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  for (json spec : {json{{"method", "none"}}, json{{"method", "ngram"}, {"draft_min", 4}, {"draft_max", 4}}}) {
    json body = {{"prompt", kStory}, {"max_tokens", 40}, {"temperature", 0.9}, {"top_p", 0.95},
                 {"seed", 1234},     {"speculative", spec}};
    json a = post_json(server.port(), "/v1/completions", body);
    json b = post_json(server.port(), "/v1/completions", body);
    EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]) << spec.dump();
    body["seed"] = 99;
    json c = post_json(server.port(), "/v1/completions", body);
    EXPECT_NE(a["choices"][0]["text"], c["choices"][0]["text"]) << "a different seed, a different story";
  }
}

TEST(ServerApi, MultiTurnReusesTheSlotsCachedPrefix) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 2");
  json messages = {{{"role", "user"}, {"content", kStory}}};
  json r1 = post_json(server.port(), "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 16}, {"temperature", 0}});
  EXPECT_EQ(r1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  messages.push_back({{"role", "assistant"}, {"content", r1["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And then?"}});
  json r2 = post_json(server.port(), "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
  const int cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, r1["usage"]["prompt_tokens"].get<int>() / 2) << r2.dump();
  EXPECT_LT(cached, r2["usage"]["prompt_tokens"].get<int>());
}

TEST(ServerApi, ConcurrentRequestsShareBatchedForwardsAndKeepTheirOutputs) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 4 --spec ngram");
  const std::vector<std::string> prompts = {kStory, "The little dog", "Lily and Ben went", "One day, a big"};
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    json r = post_json(server.port(), "/v1/completions", {{"prompt", p}, {"max_tokens", 48}, {"temperature", 0}});
    alone.push_back(r["choices"][0]["text"]);
  }
  const double iterations_before = metric_value(http_request(server.port(), "GET", "/metrics").body,
                                                "specdec_batch_iterations_total");
  std::vector<std::future<json>> together;
  for (const auto& p : prompts)
    together.push_back(std::async(std::launch::async, [&, p] {
      return post_json(server.port(), "/v1/completions", {{"prompt", p}, {"max_tokens", 48}, {"temperature", 0}});
    }));
  int64_t passes = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    json r = together[i].get();
    EXPECT_EQ(r["choices"][0]["text"], alone[i]) << "batching must not change a greedy output";
    passes += r["timings"]["speculation"]["target_passes"].get<int64_t>();
  }
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  const double iterations = metric_value(metrics, "specdec_batch_iterations_total") - iterations_before;
  std::printf("4 concurrent requests: %lld per-sequence verify steps in %.0f batched forwards\n",
              static_cast<long long>(passes), iterations);
  EXPECT_GT(iterations, 0);
  // Prompts arrive within microseconds of each other; their decode steps overlap in most forwards.
  EXPECT_LT(iterations, static_cast<double>(passes)) << metrics;
}

TEST(ServerApi, RequestLogLinePerRequest) {
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  post_json(server.port(), "/v1/completions", {{"prompt", kStory}, {"max_tokens", 4}});
  post_json(server.port(), "/v1/completions", {{"prompt", kStory}, {"max_tokens", 0}});
  const std::string log = server.log();
  EXPECT_NE(log.find("request 1 /v1/completions status 200: prompt 5 tokens"), std::string::npos) << log;
  EXPECT_NE(log.find("acceptance"), std::string::npos) << log;
  EXPECT_NE(log.find("request 2 /v1/completions status 400"), std::string::npos) << log;
}

}  // namespace
}  // namespace specdec::testing
