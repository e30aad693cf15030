// Concurrency: a bounded loopback load test, queue overflow, and client disconnects.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "server_fixture.h"

namespace specdec::testing {
namespace {

const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog", "Lily and Ben went", "One day, a big"};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Polls /metrics until `name` reaches `value` (at most timeout_seconds); returns the last value.
double wait_for_metric(ServerProcess& server, const std::string& name, double value, double timeout_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  double v = -1;
  while (seconds_since(t0) < timeout_seconds) {
    v = metric_value(http_request(server.port(), "GET", "/metrics").body, name);
    if (v == value) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return v;
}

TEST(ServerLoad, ThirtyTwoStreamingClientsFiveRequestsEach) {
  // Queue sized to hold every client: nobody may be refused.
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 4 --queue 32");
  constexpr int kClients = 32, kRequestsEach = 5, kMaxTokens = 24;
  // Reference texts (greedy, one at a time).
  std::map<std::string, std::string> expected;
  for (const auto& p : kPrompts) {
    json r = post_json(server.port(), "/v1/completions", {{"prompt", p}, {"max_tokens", kMaxTokens}, {"temperature", 0}});
    expected[p] = r["choices"][0]["text"];
    ASSERT_FALSE(expected[p].empty());
  }
  std::atomic<int> n_ok{0}, n_errors{0}, n_garbled{0}, n_wrong_text{0};
  std::mutex report_mutex;
  std::string first_problem;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kRequestsEach; ++i) {
        const std::string& prompt = kPrompts[static_cast<size_t>(c + i) % kPrompts.size()];
        const bool chat = (c + i) % 2 == 1;
        json body = {{"max_tokens", kMaxTokens}, {"temperature", 0}, {"stream", true}};
        if (chat) {
          body["messages"] = {{{"role", "user"}, {"content", prompt}}};
        } else {
          body["prompt"] = prompt;
        }
        HttpResponse r = http_request(server.port(), "POST", chat ? "/v1/chat/completions" : "/v1/completions",
                                      body.dump(), {}, 120.0);
        StreamResult s = parse_stream(r.body);
        std::string problem;
        if (r.status != 200) {
          ++n_errors;
          problem = "status " + std::to_string(r.status) + ": " + r.body;
        } else if (!r.complete || !s.done || s.garbled || s.finish_reason.empty()) {
          ++n_garbled;
          problem = "lost or garbled stream: " + r.body;
        } else if (!chat && s.text != expected[prompt]) {
          ++n_wrong_text;
          problem = "text differs for '" + prompt + "': " + s.text;
        } else {
          ++n_ok;
        }
        if (!problem.empty()) {
          std::lock_guard lock(report_mutex);
          if (first_problem.empty()) first_problem = problem;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const double seconds = seconds_since(t0);
  EXPECT_EQ(n_ok.load(), kClients * kRequestsEach) << first_problem;
  EXPECT_EQ(n_errors.load(), 0) << first_problem;
  EXPECT_EQ(n_garbled.load(), 0) << first_problem;
  EXPECT_EQ(n_wrong_text.load(), 0) << first_problem;
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  std::printf("%d streams in %.2f s; queue now %.0f, busy %.0f\n", kClients * kRequestsEach, seconds,
              metric_value(metrics, "specdec_queue_length"), metric_value(metrics, "specdec_slots_busy"));
  EXPECT_EQ(metric_value(metrics, "specdec_errors_total{kind=\"queue_full\"}"), 0);
  EXPECT_EQ(wait_for_metric(server, "specdec_slots_busy", 0, 10), 0);
}

TEST(ServerLoad, OverflowGets503AndNothingElseFails) {
  // One slot, a queue of two: 24 simultaneous requests cannot all wait.
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 1 --queue 2");
  constexpr int kClients = 24;
  std::atomic<int> n_ok{0}, n_busy{0}, n_other{0};
  std::atomic<bool> retry_after_ok{true};
  std::string first_other;
  std::mutex mutex;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      json body = {{"prompt", kPrompts[static_cast<size_t>(c) % kPrompts.size()]}, {"max_tokens", 100}, {"temperature", 0},
                   {"stream", c % 2 == 0}};
      HttpResponse r = http_request(server.port(), "POST", "/v1/completions", body.dump(), {}, 120.0);
      if (r.status == 200 && r.complete) {
        ++n_ok;
      } else if (r.status == 503) {
        ++n_busy;
        json e = json::parse(r.body, nullptr, false);
        if (r.headers["retry-after"].empty() || !e.is_object() || !e.contains("error")) retry_after_ok = false;
      } else {
        ++n_other;
        std::lock_guard lock(mutex);
        first_other = std::to_string(r.status) + " " + r.body;
      }
    });
  }
  for (auto& t : clients) t.join();
  std::printf("%d requests: %d served, %d refused with 503\n", kClients, n_ok.load(), n_busy.load());
  EXPECT_EQ(n_other.load(), 0) << first_other;
  EXPECT_GE(n_ok.load(), 1);
  EXPECT_GE(n_busy.load(), 1) << "a queue of 2 cannot hold 24 simultaneous requests";
  EXPECT_EQ(n_ok.load() + n_busy.load(), kClients);
  EXPECT_TRUE(retry_after_ok.load()) << "503 replies carry Retry-After and a JSON error";
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "specdec_errors_total{kind=\"queue_full\"}"), n_busy.load());
  EXPECT_EQ(http_request(server.port(), "GET", "/health").status, 200);
}

// A random model (256 wide, 4 layers) with a 4096-token context: with EOS banned by
// logit_bias, one generation runs for seconds, longer than any client or deadline in these tests.
std::string long_generation_model(const std::string& name) {
  TinyModelSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 512;
  spec.n_layers = 4;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.n_ctx = 4096;
  return make_random_llama(name, spec);
}

// A client that hangs up while its request generates frees the slot promptly: streaming
// (noticed at the next write) or not (the handler probes its connection while it waits). The
// request timeout (600 s by default) is far beyond the test's waits, so only a detected
// disconnect can pass.
void check_disconnect_frees_the_slot(bool stream) {
  const std::string model = long_generation_model("server-disconnect.gguf");
  ServerProcess server("-m '" + model + "' --chat-template chatml --parallel 1 --queue 4 --spec none -t 1");
  ASSERT_TRUE(server.started()) << server.log();
  // EOS (id 2) banned: the generation would run for 4000 tokens.
  const json body = {{"prompt", "hello"}, {"max_tokens", 4000}, {"temperature", 0}, {"stream", stream},
                     {"logit_bias", {{"2", -100}}}};
  const std::string payload = body.dump();
  for (int round = 0; round < 2; ++round) {
    RawConnection connection(server.port());
    ASSERT_TRUE(connection.ok());
    ASSERT_TRUE(connection.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    "Content-Length: " + std::to_string(payload.size()) + "\r\n\r\n" + payload));
    if (stream) {
      const std::string& got = connection.read_until("\"text\"", 30.0);
      ASSERT_NE(got.find("\"text\""), std::string::npos) << "no stream started: " << got;
    }
    EXPECT_EQ(wait_for_metric(server, "specdec_slots_busy", 1, 30), 1) << "still generating while connected";
    connection.close();  // hang up mid-generation
    EXPECT_EQ(wait_for_metric(server, "specdec_slots_busy", 0, 20), 0) << server.log();
    EXPECT_EQ(wait_for_metric(server, "specdec_errors_total{kind=\"cancelled\"}", round + 1, 20), round + 1)
        << server.log();
  }
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_LT(metric_value(metrics, "specdec_generated_tokens_total"), 2 * 4000) << "generation stopped early";
  EXPECT_NE(server.log().find("finish cancelled"), std::string::npos) << server.log();
  // The freed slot serves the next request.
  HttpResponse next = http_request(server.port(), "POST", "/v1/completions",
                                   R"({"prompt": "hello", "max_tokens": 4, "temperature": 0})", {}, 60.0);
  EXPECT_EQ(next.status, 200) << next.body;
}

TEST(ServerLoad, ClientDisconnectMidStreamFreesTheSlot) {
  SPECDEC_REQUIRE_CLI();
  check_disconnect_frees_the_slot(/*stream=*/true);
}

TEST(ServerLoad, ClientDisconnectDuringNonStreamingRequestFreesTheSlot) {
  SPECDEC_REQUIRE_CLI();
  check_disconnect_frees_the_slot(/*stream=*/false);
}

TEST(ServerLoad, RequestTimeoutCutsTheGenerationAndFreesTheSlot) {
  SPECDEC_REQUIRE_CLI();
  // A generation of 4000 tokens (EOS banned) on a random model with a long context outlasts a
  // 0.5 s --timeout by far: it must end with finish_reason "length", say it timed out, count a
  // timeout error and leave the slot free for the next request.
  const std::string model = long_generation_model("server-timeout.gguf");
  ServerProcess server("-m '" + model + "' --parallel 1 --queue 4 --spec none -t 1 --timeout 0.5");
  ASSERT_TRUE(server.started()) << server.log();
  const json body = {{"prompt", "hello"}, {"max_tokens", 4000}, {"temperature", 0}, {"logit_bias", {{"2", -100}}}};
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse raw;
  const json reply = post_json(server.port(), "/v1/completions", body, &raw);
  const double elapsed = seconds_since(t0);
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "length") << raw.body;
  EXPECT_EQ(reply["timings"]["timed_out"], true) << raw.body;
  EXPECT_LT(reply["usage"]["completion_tokens"].get<int>(), 4000) << "the generation was not cut";
  EXPECT_GT(reply["usage"]["completion_tokens"].get<int>(), 0) << "the text generated before the deadline is kept";
  EXPECT_LT(elapsed, 30.0) << "cut at the deadline, not at the end of the generation";
  EXPECT_EQ(wait_for_metric(server, "specdec_errors_total{kind=\"timeout\"}", 1, 20), 1) << server.log();
  EXPECT_EQ(wait_for_metric(server, "specdec_slots_busy", 0, 20), 0) << server.log();
  EXPECT_NE(server.log().find("(timed out)"), std::string::npos) << server.log();
  HttpResponse next = http_request(server.port(), "POST", "/v1/completions",
                                   R"({"prompt": "hello", "max_tokens": 4, "temperature": 0})", {}, 60.0);
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(json::parse(next.body)["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace specdec::testing
