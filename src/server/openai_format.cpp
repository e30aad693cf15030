// server/openai_format.cpp — see openai_format.h.
#include "server/openai_format.h"

namespace specdec::server {

using nlohmann::json;

namespace {

const char* object_name(Endpoint endpoint, bool chunk) {
  if (endpoint == Endpoint::Completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json bytes_of(const std::string& text) {
  json out = json::array();
  for (unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

// Token texts may be partial UTF-8 sequences; JSON strings must be valid UTF-8.
std::string json_safe(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

json base(const ParsedRequest& request, const ResponseIds& ids, bool chunk) {
  return json{{"id", ids.id}, {"object", object_name(request.endpoint, chunk)}, {"created", ids.created},
              {"model", ids.model}};
}

}  // namespace

std::string api_finish_reason(const JobResult& result) {
  if (result.timed_out) return "length";
  return result.finish_reason;
}

json usage_json(const JobResult& r) {
  return json{{"prompt_tokens", r.n_prompt},
              {"completion_tokens", r.n_generated},
              {"total_tokens", r.n_prompt + r.n_generated},
              {"prompt_tokens_details", {{"cached_tokens", r.n_cached}}}};
}

json timings_json(const JobResult& r) {
  json by_pos = json::array();
  for (size_t k = 0; k < r.drafted_by_pos.size(); ++k)
    by_pos.push_back(r.drafted_by_pos[k] ? double(r.accepted_by_pos[k]) / double(r.drafted_by_pos[k]) : 0.0);
  const double rate = r.n_drafted ? double(r.n_accepted) / double(r.n_drafted) : 0.0;
  const double per_pass = r.n_target_passes ? double(r.n_generated) / double(r.n_target_passes) : 0.0;
  return json{{"queue_ms", r.queue_seconds * 1e3},
              {"prompt_n", r.n_prompt},
              {"prompt_cached_n", r.n_cached},
              {"prompt_ms", r.prefill_seconds * 1e3},
              {"time_to_first_token_ms", r.ttft_seconds * 1e3},
              {"predicted_n", r.n_generated},
              {"predicted_ms", r.decode_seconds * 1e3},
              {"predicted_per_second", r.decode_seconds > 0 ? r.n_generated / r.decode_seconds : 0.0},
              {"timed_out", r.timed_out},
              {"speculation",
               {{"method", r.method},
                {"drafted", r.n_drafted},
                {"accepted", r.n_accepted},
                {"acceptance_rate", rate},
                {"target_passes", r.n_target_passes},
                {"tokens_per_target_pass", per_pass},
                {"acceptance_by_position", by_pos}}}};
}

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs, size_t offset_base) {
  if (endpoint == Endpoint::ChatCompletions) {
    json content = json::array();
    for (const auto& lp : logprobs) {
      json top = json::array();
      for (const auto& t : lp.top)
        top.push_back({{"token", json_safe(t.text)}, {"logprob", t.logprob}, {"bytes", bytes_of(t.text)}});
      content.push_back(
          {{"token", json_safe(lp.text)}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.text)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  size_t offset = offset_base;
  for (const auto& lp : logprobs) {
    tokens.push_back(json_safe(lp.text));
    token_logprobs.push_back(lp.logprob);
    json top = json::object();
    for (const auto& t : lp.top) top[json_safe(t.text)] = t.logprob;
    top_logprobs.push_back(top);
    text_offset.push_back(offset);
    offset += lp.text.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
              {"text_offset", text_offset}};
}

json response_json(const ParsedRequest& request, const ResponseIds& ids, const JobResult& r) {
  json out = base(request, ids, false);
  json choice = {{"index", 0}, {"finish_reason", api_finish_reason(r)}};
  choice["logprobs"] = request.logprobs ? logprobs_json(request.endpoint, r.logprobs, 0) : json(nullptr);
  if (request.endpoint == Endpoint::Completions) {
    choice["text"] = r.text;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage_json(r);
  out["timings"] = timings_json(r);
  return out;
}

json chunk_json(const ParsedRequest& request, const ResponseIds& ids, const std::string& text,
                const std::vector<TokenLogprob>* logprobs, size_t text_offset, bool first) {
  json out = base(request, ids, true);
  json choice = {{"index", 0}, {"finish_reason", nullptr}};
  choice["logprobs"] = (request.logprobs && logprobs) ? logprobs_json(request.endpoint, *logprobs, text_offset)
                                                      : json(nullptr);
  if (request.endpoint == Endpoint::Completions) {
    choice["text"] = text;
  } else {
    choice["delta"] = first ? json{{"role", "assistant"}, {"content", text}} : json{{"content", text}};
  }
  out["choices"] = json::array({choice});
  return out;
}

json final_chunk_json(const ParsedRequest& request, const ResponseIds& ids, const JobResult& r) {
  json out = base(request, ids, true);
  json choice = {{"index", 0}, {"finish_reason", api_finish_reason(r)}, {"logprobs", nullptr}};
  if (request.endpoint == Endpoint::Completions) {
    choice["text"] = "";
  } else {
    choice["delta"] = json::object();
  }
  out["choices"] = json::array({choice});
  out["timings"] = timings_json(r);
  return out;
}

json usage_chunk_json(const ParsedRequest& request, const ResponseIds& ids, const JobResult& r) {
  json out = base(request, ids, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(r);
  return out;
}

json error_json(int status, const std::string& message, const std::string& param) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 503 ? "server_overloaded"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return json{{"error",
               {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", status}}}};
}

}  // namespace specdec::server
