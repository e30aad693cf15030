// server/openai_format.h — results -> OpenAI-compatible response bodies and stream chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_types.h"

namespace specdec::server {

// Identity of one response: every chunk of a stream carries the same id / created / model.
struct ResponseIds {
  std::string id;        // "cmpl-N" | "chatcmpl-N"
  int64_t created = 0;   // unix seconds
  std::string model;
};

// "length" for timeouts and a full context; "stop"; other reasons pass through.
std::string api_finish_reason(const JobResult& result);

// usage {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details.cached_tokens}.
nlohmann::json usage_json(const JobResult& result);
// timings + speculation block (queue, prefill, ttft, decode, drafted, accepted, acceptance...).
nlohmann::json timings_json(const JobResult& result);
// Logprobs in the endpoint's format (completions: tokens/token_logprobs/top_logprobs/text_offset;
// chat: content[{token, logprob, bytes, top_logprobs}]). text_offset counts from offset_base.
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs, size_t offset_base);

// The whole non-streaming response.
nlohmann::json response_json(const ParsedRequest& request, const ResponseIds& ids, const JobResult& result);
// One stream chunk carrying `text` (and its tokens' logprobs); first = the chat role delta.
nlohmann::json chunk_json(const ParsedRequest& request, const ResponseIds& ids, const std::string& text,
                          const std::vector<TokenLogprob>* logprobs, size_t text_offset, bool first);
// The last content chunk: empty text / delta with finish_reason and timings.
nlohmann::json final_chunk_json(const ParsedRequest& request, const ResponseIds& ids, const JobResult& result);
// The usage chunk of stream_options.include_usage (choices: []).
nlohmann::json usage_chunk_json(const ParsedRequest& request, const ResponseIds& ids, const JobResult& result);

// {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_json(int status, const std::string& message, const std::string& param = {});

}  // namespace specdec::server
