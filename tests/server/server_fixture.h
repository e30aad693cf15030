// tests/server/server_fixture.h — shared pieces of the server tests: the stories260K server and
// JSON request helpers.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/cli_run.h"
#include "common/testing.h"
#include "server_process.h"

namespace specdec::testing {

using nlohmann::json;

// POSTs a JSON body; the parsed JSON reply (null when the body is not JSON).
inline json post_json(int port, const std::string& path, const json& body, HttpResponse* raw = nullptr,
                      const std::vector<std::string>& headers = {}) {
  HttpResponse r = http_request(port, "POST", path, body.dump(), headers);
  json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (raw) *raw = std::move(r);
  return parsed.is_discarded() ? json() : parsed;
}

// Concatenated text of a completions / chat stream; *n_chunks counts content chunks; *done when
// it ended with [DONE]; *finish the finish_reason; *last_json the chunk with the timings.
struct StreamResult {
  std::string text;
  int n_chunks = 0;
  bool done = false;
  bool garbled = false;      // a data line that is not JSON, or data after [DONE]
  std::string finish_reason;
  json final_chunk;
  json usage;
  json logprobs = json::array();
};

inline StreamResult parse_stream(const std::string& body) {
  StreamResult out;
  for (const auto& data : sse_data(body)) {
    if (out.done) out.garbled = true;
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded() || !chunk.is_object()) {
      out.garbled = true;
      continue;
    }
    if (chunk.contains("error")) {
      out.garbled = true;
      continue;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) out.usage = chunk["usage"];
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    std::string piece;
    if (choice.contains("text")) piece = choice["text"].get<std::string>();
    if (choice.contains("delta") && choice["delta"].contains("content"))
      piece = choice["delta"]["content"].get<std::string>();
    out.text += piece;
    if (!piece.empty()) ++out.n_chunks;
    if (choice.contains("logprobs") && choice["logprobs"].is_object()) {
      const json& lp = choice["logprobs"];
      if (lp.contains("content"))
        for (const auto& t : lp["content"]) out.logprobs.push_back(t);
      if (lp.contains("tokens"))
        for (const auto& t : lp["tokens"]) out.logprobs.push_back(t);
    }
    if (!choice["finish_reason"].is_null()) {
      out.finish_reason = choice["finish_reason"].get<std::string>();
      out.final_chunk = chunk;
    }
  }
  return out;
}

}  // namespace specdec::testing

// Starts a stories260K server (skips without the fixture / the program).
#define SPECDEC_START_SERVER(var, extra_args)                                                      \
  SPECDEC_REQUIRE_CLI();                                                                           \
  SPECDEC_FIXTURE(var##_model, "models/stories260K.gguf");                                         \
  ::specdec::testing::ServerProcess var("-m '" + var##_model + "' " + std::string(extra_args));    \
  ASSERT_TRUE(var.started()) << var.log()
