// fuzz/fuzz_request.cpp — libFuzzer target: the server's request parser (src/server/
// request_parse.cpp) on arbitrary bodies for /v1/completions and /v1/chat/completions, with the
// stories260K model served under the ChatML template.
//
// Input layout: byte 0 picks the endpoint (even: completions, odd: chat), the rest is the body.
// Crash conditions: any sanitizer report (UBSan includes float-to-int overflow), or an exception
// other than ApiError / specdec::Error escaping (the HTTP layer would answer 500 instead of a
// 400 naming the field). A parsed request must be within the limits the engine accepts.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "fuzz_common.h"
#include "server/api_types.h"
#include "server/request_parse.h"
#include "specdec/engine.h"

namespace specdec {
namespace {

std::unique_ptr<Engine>& engine() {
  static std::unique_ptr<Engine> e;
  return e;
}

server::ServedModel& served() {
  static server::ServedModel m;
  return m;
}

}  // namespace
}  // namespace specdec

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace specdec;
  EngineOptions options;
  options.model_path = fuzz::fixtures_dir() + "/models/stories260K.gguf";
  options.n_threads = 1;
  try {
    engine() = std::make_unique<Engine>(options);
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz_request: %s (set SPECDEC_FIXTURES)\n", e.what());
    std::exit(1);
  }
  server::ServedModel& m = served();
  m.engine = engine().get();
  m.id = "stories260K.gguf";
  m.accepted_names = {m.id, "stories260K"};
  m.chat_family = ChatFamily::ChatML;
  m.bos_text = "<s>";
  m.eos_text = "</s>";
  m.default_spec.method = engine()->method();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specdec;
  if (size == 0) return 0;
  const auto endpoint = (data[0] & 1) ? server::Endpoint::ChatCompletions : server::Endpoint::Completions;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const server::ParsedRequest r = server::parse_request(endpoint, body, served());
    const int n_ctx = engine()->n_ctx();
    FUZZ_PROPERTY(!r.job.prompt.empty() && static_cast<int>(r.job.prompt.size()) < n_ctx, "prompt fits");
    FUZZ_PROPERTY(r.job.max_tokens >= 1 && r.job.max_tokens <= n_ctx, "max_tokens in range");
    for (Token t : r.job.prompt)
      FUZZ_PROPERTY(t >= 0 && t < engine()->tokenizer().n_vocab(), "prompt token " + std::to_string(t));
  } catch (const server::ApiError& e) {
    FUZZ_PROPERTY(e.status >= 400 && e.status < 500, "client error status " + std::to_string(e.status));
  } catch (const Error&) {
  }
  return 0;
}
