// Regressions found by the fuzz targets (fuzz/fuzz_request.cpp): each input once made the request
// parser throw something other than ApiError, which the HTTP layer answers with 500 instead of a
// 400 naming the problem.
#include <gtest/gtest.h>

#include "common/cli_run.h"
#include "common/testing.h"
#include "server_fixture.h"

namespace specdec::testing {
namespace {

TEST(ServerFuzzRegressions, NumberOverflowInTheBodyIs400) {
  SPECDEC_START_SERVER(server, "--chat-template chatml");
  // nlohmann::json throws out_of_range (406), not parse_error, for a number it cannot represent.
  for (const char* body : {R"({"prompt": "a", "seed": -1e30223})", R"({"prompt": "a", "max_tokens": 1e999})"}) {
    SCOPED_TRACE(body);
    HttpResponse r = http_request(server.port(), "POST", "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << r.body;
    json reply = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(reply.is_object() && reply.contains("error")) << r.body;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find("invalid JSON body"), std::string::npos) << r.body;
  }
  EXPECT_EQ(http_request(server.port(), "GET", "/health").status, 200);
}

}  // namespace
}  // namespace specdec::testing
