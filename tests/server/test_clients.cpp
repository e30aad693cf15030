// Real clients against `specdec serve`: the official OpenAI JavaScript SDK (tests/clients,
// pinned by package-lock.json, installed by scripts/install-deps.sh with `npm ci`) and curl.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "common/testing.h"
#include "server_fixture.h"

namespace specdec::testing {
namespace {

// Runs a shell command (bounded by `timeout`), returning its exit status and output.
int run_command(const std::string& command, std::string* output) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool have_program(const char* name) {
  std::string out;
  return run_command(std::string("command -v ") + name + " >/dev/null 2>&1", &out) == 0;
}

TEST(ServerClients, OpenAIJavaScriptSdk) {
  const std::string clients = std::string(SPECDEC_SOURCE_DIR) + "/tests/clients";
  if (!have_program("node")) {
    if (fixtures_required()) FAIL() << "node is required in CI (scripts/install-deps.sh installs it)";
    GTEST_SKIP() << "node not found: the OpenAI JavaScript SDK test is skipped";
  }
  if (!std::filesystem::exists(clients + "/node_modules/openai/package.json")) {
    if (fixtures_required()) FAIL() << "the openai package is not installed: run scripts/install-deps.sh";
    GTEST_SKIP() << "tests/clients/node_modules/openai missing (run `npm ci` in tests/clients): skipped";
  }
  SPECDEC_START_SERVER(server, "--chat-template chatml --parallel 2 --api-key sdk-test-key");
  std::string output;
  const int status = run_command("cd '" + clients + "' && timeout 120 node openai_sdk_test.mjs " + server.url() +
                                     " sdk-test-key 2>&1",
                                 &output);
  std::printf("%s", output.c_str());
  EXPECT_EQ(status, 0) << output << "\nserver log:\n" << server.log();
  EXPECT_NE(output.find("all checks passed"), std::string::npos) << output;
}

TEST(ServerClients, CurlStreaming) {
  if (!have_program("curl")) {
    if (fixtures_required()) FAIL() << "curl is required in CI (scripts/install-deps.sh installs it)";
    GTEST_SKIP() << "curl not found: the curl streaming test is skipped";
  }
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0)";
  std::string plain, streamed;
  ASSERT_EQ(run_command("curl -sS --max-time 60 " + server.url() + "/v1/completions -H 'Content-Type: application/json' "
                        "-d '" + body + "}'", &plain), 0);
  ASSERT_EQ(run_command("curl -sSN --max-time 60 " + server.url() + "/v1/completions -H 'Content-Type: application/json' "
                        "-d '" + body + ", \"stream\": true}'", &streamed), 0);
  StreamResult s = parse_stream(streamed);
  EXPECT_TRUE(s.done && !s.garbled) << streamed;
  EXPECT_GT(s.n_chunks, 1);
  EXPECT_EQ(s.text, json::parse(plain)["choices"][0]["text"]) << plain;
  EXPECT_EQ(streamed.substr(streamed.size() - 14), "data: [DONE]\n\n");
}

}  // namespace
}  // namespace specdec::testing
