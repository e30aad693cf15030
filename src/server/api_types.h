// server/api_types.h — what the HTTP layer, the request parser and the response formatter
// share: the served model, the parsed request, and errors that become 4xx/5xx JSON bodies.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/job.h"
#include "specdec/chat_template.h"
#include "specdec/engine.h"

namespace specdec::server {

// An error answered as {"error": {"message", "type", "param", "code"}} with `status`.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string kind, const std::string& message, std::string param = {})
      : std::runtime_error(message), status(status), kind(std::move(kind)), param(std::move(param)) {}
  int status;         // HTTP status
  std::string kind;   // metrics kind: bad_request | unauthorized | not_found | too_large | queue_full | ...
  std::string param;  // offending request field ("" when none)
};

// The model as the API presents it, and server-wide request defaults.
struct ServedModel {
  Engine* engine = nullptr;
  std::string id;                          // /v1/models id (file name or --alias)
  std::vector<std::string> accepted_names; // names a request's "model" may use
  std::optional<ChatFamily> chat_family;   // nullopt: chat requests get 400 (see chat_error)
  std::string chat_error;                  // why there is no chat family (names the template)
  std::string bos_text, eos_text;          // special-token texts for the chat renderer
  SpecSettings default_spec;
  int max_logprobs = 20;
};

enum class Endpoint { Completions, ChatCompletions };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  JobRequest job;
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  bool logprobs = false;                   // per-token logprobs in the response
};

}  // namespace specdec::server
