// Bad input: each gets a 4xx with a JSON error body, and the server stays healthy.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/cli_run.h"
#include "common/testing.h"
#include "common/tiny_model.h"
#include "server_fixture.h"
#include "specdec/chat_template.h"

namespace specdec::testing {
namespace {

struct BadCase {
  const char* what;
  const char* path;
  std::string body;
  int status;
  const char* message_part;  // the error message must name the offending thing
};

void expect_error(ServerProcess& server, const BadCase& c, const std::vector<std::string>& headers = {}) {
  SCOPED_TRACE(c.what);
  HttpResponse r = http_request(server.port(), "POST", c.path, c.body, headers);
  EXPECT_EQ(r.status, c.status) << r.body;
  EXPECT_NE(r.headers["content-type"].find("application/json"), std::string::npos);
  json body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << r.body;
  const std::string message = body["error"]["message"];
  EXPECT_NE(message.find(c.message_part), std::string::npos) << message;
  EXPECT_TRUE(body["error"].contains("type"));
  HttpResponse health = http_request(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200) << "server unhealthy after: " << c.what;
}

TEST(ServerErrors, BadRequestsGet4xxWithJsonBodies) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --max-body 4096");
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 200; ++i) s += "hello ";
    return s;
  }();
  const std::vector<BadCase> cases = {
      {"invalid JSON", "/v1/completions", "{\"prompt\": \"hi\",", 400, "invalid JSON"},
      {"not an object", "/v1/completions", "[1, 2]", 400, "JSON object"},
      {"max_tokens of the wrong type", "/v1/completions", R"({"prompt": "hi", "max_tokens": "10"})", 400, "max_tokens"},
      {"temperature of the wrong type", "/v1/completions", R"({"prompt": "hi", "temperature": "hot"})", 400,
       "temperature"},
      {"stream of the wrong type", "/v1/completions", R"({"prompt": "hi", "stream": 1})", 400, "stream"},
      {"stop of the wrong type", "/v1/completions", R"({"prompt": "hi", "stop": 5})", 400, "stop"},
      {"logit_bias of the wrong type", "/v1/completions", R"({"prompt": "hi", "logit_bias": [1]})", 400, "logit_bias"},
      {"logit_bias with a bad token", "/v1/completions", R"({"prompt": "hi", "logit_bias": {"99999": 1}})", 400,
       "99999"},
      {"messages of the wrong type", "/v1/chat/completions", R"({"messages": "hi"})", 400, "messages"},
      {"message without a role", "/v1/chat/completions", R"({"messages": [{"content": "hi"}]})", 400,
       "messages[0].role"},
      {"message with an unknown role", "/v1/chat/completions",
       R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400, "wizard"},
      {"missing prompt", "/v1/completions", R"({"max_tokens": 5})", 400, "prompt"},
      {"missing messages", "/v1/chat/completions", R"({"max_tokens": 5})", 400, "messages"},
      {"unknown model", "/v1/completions", R"({"model": "gpt-17", "prompt": "hi"})", 404, "gpt-17"},
      {"model of the wrong type", "/v1/completions", R"({"model": 7, "prompt": "hi"})", 400, "model"},
      {"prompt longer than the context", "/v1/completions", json{{"prompt", long_prompt}}.dump(), 400,
       "does not fit the context of 128"},
      {"max_tokens 0", "/v1/completions", R"({"prompt": "hi", "max_tokens": 0})", 400, "max_tokens"},
      {"max_tokens negative", "/v1/completions", R"({"prompt": "hi", "max_tokens": -5})", 400, "max_tokens"},
      {"max_tokens absurdly large", "/v1/completions", R"({"prompt": "hi", "max_tokens": 1000000000})", 400,
       "exceeds the context length"},
      {"temperature < 0", "/v1/completions", R"({"prompt": "hi", "temperature": -0.5})", 400, "temperature"},
      {"top_p 0", "/v1/completions", R"({"prompt": "hi", "top_p": 0})", 400, "top_p"},
      {"n > 1", "/v1/completions", R"({"prompt": "hi", "n": 2})", 400, "n = 1"},
      {"non-UTF-8 bytes", "/v1/completions", std::string("{\"prompt\": \"caf\xe9 \xff\xfe\"}"), 400, "UTF-8"},
      {"oversized body", "/v1/completions", "{\"prompt\": \"" + std::string(5000, 'a') + "\"}", 413, "4096 bytes"},
      {"speculative method unknown", "/v1/completions", R"({"prompt": "hi", "speculative": {"method": "magic"}})", 400,
       "magic"},
      {"speculative draft model absent", "/v1/completions", R"({"prompt": "hi", "speculative": {"method": "draft"}})",
       400, "draft model"},
      {"speculative draft_min > draft_max", "/v1/completions",
       R"({"prompt": "hi", "speculative": {"draft_max": 2, "draft_min": 3}})", 400, "draft_min"},
      {"top_logprobs without logprobs", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", 400, "logprobs"},
      {"logprobs too many", "/v1/completions", R"({"prompt": "hi", "logprobs": 50})", 400, "logprobs"},
      {"unknown endpoint", "/v1/embeddings", R"({"input": "hi"})", 404, "no such endpoint"},
  };
  for (const auto& c : cases) expect_error(server, c);
  // The errors were counted, and a good request still works.
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_GE(metric_value(metrics, "specdec_errors_total{kind=\"bad_request\"}"), 20) << metrics;
  EXPECT_EQ(metric_value(metrics, "specdec_errors_total{kind=\"too_large\"}"), 1) << metrics;
  json ok = post_json(server.port(), "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 5}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 5) << ok.dump();
}

TEST(ServerErrors, ApiKeyIsRequiredWhenSet) {
  SPECDEC_START_SERVER(server, "--chat-template chatml --api-key s3cret");
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 3})";
  expect_error(server, {"missing API key", "/v1/completions", body, 401, "missing API key"});
  expect_error(server, {"wrong API key", "/v1/completions", body, 401, "invalid API key"},
               {"Authorization: Bearer nope"});
  HttpResponse models = http_request(server.port(), "GET", "/v1/models");
  EXPECT_EQ(models.status, 401);
  HttpResponse ok = http_request(server.port(), "POST", "/v1/completions", body, {"Authorization: Bearer s3cret"});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(http_request(server.port(), "GET", "/health").status, 200) << "health needs no key";
}

TEST(ServerErrors, ChatWithoutATemplateNamesTheProblem) {
  SPECDEC_START_SERVER(server, "");  // stories260K carries no tokenizer.chat_template
  expect_error(server, {"no chat template", "/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}]})", 400, "--chat-template"});
  // Completions still work.
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
}

TEST(ServerErrors, TemplateRejectionsAre400WithTheTemplatesMessage) {
  SPECDEC_START_SERVER(server, "--chat-template gemma");
  expect_error(server, {"system role under gemma", "/v1/chat/completions",
                        R"({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]})",
                        400, "System role not supported"});
}

// A copy of stories260K whose tokenizer.chat_template is `jinja` (no --chat-template given).
std::string model_with_template(const std::string& model, const std::string& name, const std::string& jinja) {
  const std::string path = temp_dir() + "/stories260K-template-" + name + ".gguf";
  write_edited_copy(model, path, [&](GgufWriter& w) { w.set_string("tokenizer.chat_template", jinja); });
  return path;
}

TEST(ServerErrors, TheGgufsOwnTemplateIsDetectedAndRendered) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  std::ifstream in(std::string(SPECDEC_SOURCE_DIR) + "/tests/server/data/chat_templates/chatml.jinja");
  std::stringstream jinja;
  jinja << in.rdbuf();
  ASSERT_FALSE(jinja.str().empty());
  ServerProcess server("-m '" + model_with_template(model, "chatml", jinja.str()) + "'");
  ASSERT_TRUE(server.started()) << server.log();
  json models = json::parse(http_request(server.port(), "GET", "/v1/models").body);
  EXPECT_EQ(models["data"][0]["meta"]["chat_template"], "chatml");
  // The chat reply is the greedy continuation of the ChatML rendering of the messages.
  const json messages = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Tell a story."}}};
  HttpResponse raw;
  json chat = post_json(server.port(), "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}}, &raw);
  ASSERT_EQ(raw.status, 200) << raw.body;
  const std::vector<ChatMessage> as_messages = {{"system", "Be brief."}, {"user", "Tell a story."}};
  const std::string rendered = render_chat(ChatFamily::ChatML, as_messages, "", "", true);
  json completion = post_json(server.port(), "/v1/completions", {{"prompt", rendered}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(chat["choices"][0]["message"]["content"], completion["choices"][0]["text"]);
  EXPECT_EQ(chat["usage"]["prompt_tokens"], completion["usage"]["prompt_tokens"]);
}

TEST(ServerErrors, AnUnsupportedGgufTemplateIs400NamingIt) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string jinja = "{% for m in messages %}<<{{ m['role'] }}>> {{ m['content'] }}{% endfor %}";
  ServerProcess server("-m '" + model_with_template(model, "custom", jinja) + "'");
  ASSERT_TRUE(server.started()) << server.log();
  EXPECT_NE(server.log().find("is not supported"), std::string::npos) << "a warning at start-up: " << server.log();
  // The message quotes the template's beginning and names the way out.
  expect_error(server, {"unsupported template", "/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}]})", 400, "<<{{ m['role'] }}>>"});
  expect_error(server, {"unsupported template, way out", "/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}]})", 400, "--chat-template"});
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
}

TEST(ServerErrors, BadServerOptionsAreMessages) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto r = run_cli("serve -m '" + model + "' --chat-template vicuna --port 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("vicuna"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chatml"), std::string::npos) << "lists the supported names: " << r.err;
  r = run_cli("serve -m /nonexistent.gguf --port 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace specdec::testing
