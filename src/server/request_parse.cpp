// server/request_parse.cpp — see request_parse.h. Every rejection names the field and value.
#include "server/request_parse.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "specdec/error.h"

namespace specdec::server {

namespace {

using nlohmann::json;

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, "bad_request", message, param);
}

std::string type_name(const json& v) { return v.type_name(); }

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number_field(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw bad(name, std::string("'") + name + "' must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad(name, std::string("'") + name + "' = " + v->dump() + " is out of range [" + json(lo).dump() + ", " +
                        json(hi).dump() + "]");
  return x;
}

int64_t integer_field(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  double x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw bad(name, std::string("'") + name + "' = " + v->dump() + " is out of range");
    x = static_cast<double>(v->get<int64_t>());
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
    x = v->get<double>();
  } else {
    throw bad(name, std::string("'") + name + "' must be an integer, got " + type_name(*v) + " " + v->dump());
  }
  if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi)))
    throw bad(name, std::string("'") + name + "' = " + v->dump() + " is out of range [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
  return static_cast<int64_t>(x);
}

bool bool_field(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad(name, std::string("'") + name + "' must be a boolean, got " + type_name(*v));
  return v->get<bool>();
}

void check_model(const json& body, const ServedModel& model) {
  const json* v = field(body, "model");
  if (!v) return;  // optional here: one model is served
  if (!v->is_string()) throw bad("model", "'model' must be a string, got " + type_name(*v));
  const std::string name = v->get<std::string>();
  for (const auto& accepted : model.accepted_names)
    if (name == accepted) return;
  throw ApiError(404, "not_found", "model '" + name + "' does not exist; this server serves '" + model.id + "'",
                 "model");
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 4) throw bad("stop", "'stop' has " + std::to_string(v->size()) + " strings; at most 4 are allowed");
    for (const auto& s : *v) {
      if (!s.is_string()) throw bad("stop", "'stop' entries must be strings, got " + type_name(s));
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", "'stop' must be a string or an array of strings, got " + type_name(*v));
  }
  for (const auto& s : stops)
    if (s.empty()) throw bad("stop", "'stop' strings must not be empty");
  return stops;
}

std::vector<std::pair<Token, float>> parse_logit_bias(const json& body, int n_vocab) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw bad("logit_bias", "'logit_bias' must be an object {token_id: bias}, got " + type_name(*v));
  std::vector<std::pair<Token, float>> out;
  for (const auto& [key, value] : v->items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab)
      throw bad("logit_bias", "'logit_bias' key '" + key + "' is not a token id in [0, " + std::to_string(n_vocab) + ")");
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
      throw bad("logit_bias", "'logit_bias' value for token " + key + " must be a number in [-100, 100], got " +
                                  value.dump());
    out.emplace_back(static_cast<Token>(id), value.get<float>());
  }
  return out;
}

SpecSettings parse_speculative(const json& body, const ServedModel& model) {
  SpecSettings spec = model.default_spec;
  const json* v = field(body, "speculative");
  if (!v) return spec;
  if (v->is_boolean()) {
    if (!v->get<bool>()) spec.method = SpecMethod::None;
    return spec;
  }
  if (!v->is_object()) throw bad("speculative", "'speculative' must be an object, got " + type_name(*v));
  if (const json* m = field(*v, "method")) {
    if (!m->is_string()) throw bad("speculative.method", "'speculative.method' must be a string, got " + type_name(*m));
    try {
      spec.method = parse_spec_method(m->get<std::string>());
    } catch (const Error& e) {
      throw bad("speculative.method", std::string("'speculative.method': ") + e.what());
    }
    const bool needs_draft = spec.method == SpecMethod::Draft || spec.method == SpecMethod::Hybrid;
    if (needs_draft && !model.engine->draft_model())
      throw bad("speculative.method", "'speculative.method' = \"" + m->get<std::string>() +
                                          "\" needs a draft model; start the server with -md DRAFT.gguf");
  }
  spec.draft_max = static_cast<int>(integer_field(*v, "draft_max", spec.draft_max, 0, 64));
  spec.draft_min = static_cast<int>(integer_field(*v, "draft_min", std::min(spec.draft_min, spec.draft_max), 0, 64));
  if (spec.draft_min > spec.draft_max)
    throw bad("speculative.draft_min", "'speculative.draft_min' = " + std::to_string(spec.draft_min) +
                                           " exceeds draft_max = " + std::to_string(spec.draft_max));
  spec.p_min = static_cast<float>(number_field(*v, "p_min", spec.p_min, 0.0, 1.0));
  spec.adaptive = bool_field(*v, "adaptive", spec.adaptive);
  return spec;
}

// OpenAI message content: a string, or an array of {"type": "text", "text": ...} parts.
std::string message_content(const json& m, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string text;
    for (const auto& part : *it) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        throw bad(where, "'" + where + "' parts must be {\"type\": \"text\", \"text\": string}");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  throw bad(where, "'" + where + "' must be a string or an array of text parts, got " + type_name(*it));
}

std::vector<Token> chat_prompt(const json& body, const ServedModel& model) {
  const json* v = field(body, "messages");
  if (!v) throw bad("messages", "missing required field 'messages'");
  if (!v->is_array() || v->empty()) throw bad("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad(where, "'" + where + "' must be an object, got " + type_name(m));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw bad(where + ".role", "'" + where + ".role' must be a string");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "developer")
      throw bad(where + ".role", "'" + where + ".role' = \"" + r + "\" is not supported (system, user, assistant)");
    messages.push_back({r == "developer" ? "system" : r, message_content(m, i)});
  }
  if (!model.chat_family) throw bad("messages", model.chat_error);
  std::string text;
  try {
    text = render_chat(*model.chat_family, messages, model.bos_text, model.eos_text, /*add_generation_prompt=*/true);
  } catch (const ChatTemplateError& e) {
    throw bad("messages", std::string("chat template ") + chat_family_name(*model.chat_family) +
                              " rejected the conversation: " + e.what());
  }
  const Tokenizer& tokenizer = model.engine->tokenizer();
  std::vector<Token> tokens = tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/true);
  const Token bos = tokenizer.special().bos;
  if (tokenizer.special().add_bos && bos >= 0 && (tokens.empty() || tokens.front() != bos))
    tokens.insert(tokens.begin(), bos);
  return tokens;
}

std::vector<Token> completion_prompt(const json& body, const ServedModel& model) {
  const json* v = field(body, "prompt");
  if (!v) throw bad("prompt", "missing required field 'prompt'");
  const Tokenizer& tokenizer = model.engine->tokenizer();
  const json* p = v;
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) p = &(*v)[0];
  if (p->is_string()) return tokenizer.encode(p->get<std::string>(), /*add_special=*/true, /*parse_special=*/false);
  if (v->is_array() && !v->empty() && std::all_of(v->begin(), v->end(), [](const json& t) { return t.is_number_integer(); })) {
    std::vector<Token> tokens;
    for (const auto& t : *v) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= tokenizer.n_vocab())
        throw bad("prompt", "'prompt' token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(tokenizer.n_vocab()) + ")");
      tokens.push_back(static_cast<Token>(id));
    }
    return tokens;
  }
  if (v->is_array() && v->size() > 1) throw bad("prompt", "only one prompt per request is supported (n = 1)");
  throw bad("prompt", "'prompt' must be a string, an array of one string or an array of token ids, got " + type_name(*v));
}

}  // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& body_text, const ServedModel& model) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range 406 for a number like -1e30223
    throw bad("", std::string("invalid JSON body (must be UTF-8 JSON): ") + e.what());
  }
  if (!body.is_object()) throw bad("", "the request body must be a JSON object, got " + type_name(body));
  check_model(body, model);

  ParsedRequest out;
  out.endpoint = endpoint;
  JobRequest& job = out.job;
  const int n_ctx = model.engine->n_ctx();
  const int n_vocab = model.engine->tokenizer().n_vocab();

  if (integer_field(body, "n", 1, 1, 1 << 20) != 1) throw bad("n", "only n = 1 is supported");
  out.stream = bool_field(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad("stream_options", "'stream_options' must be an object");
    out.include_usage = bool_field(*so, "include_usage", false);
  }

  SamplingParams& s = job.sampling;
  s.temperature = static_cast<float>(number_field(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(number_field(body, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0.0f) throw bad("top_p", "'top_p' must be > 0");
  s.top_k = static_cast<int>(integer_field(body, "top_k", 0, 0, n_vocab));
  s.min_p = static_cast<float>(number_field(body, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(number_field(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(number_field(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repeat_penalty = static_cast<float>(number_field(body, "repeat_penalty", 1.0, 0.0, 10.0));
  s.logit_bias = parse_logit_bias(body, n_vocab);
  if (field(body, "seed")) {
    s.seed = static_cast<uint64_t>(integer_field(body, "seed", 0, INT64_MIN, INT64_MAX));
  } else {
    static thread_local std::mt19937_64 seeds{std::random_device{}()};
    s.seed = seeds();
  }
  job.stop = parse_stop(body);
  job.spec = parse_speculative(body, model);

  if (endpoint == Endpoint::Completions) {
    const json* lp = field(body, "logprobs");
    if (lp && lp->is_boolean()) throw bad("logprobs", "'logprobs' must be an integer for /v1/completions");
    job.n_logprobs = static_cast<int>(integer_field(body, "logprobs", -1, 0, model.max_logprobs));
    out.logprobs = job.n_logprobs >= 0;
  } else {
    out.logprobs = bool_field(body, "logprobs", false);
    const int top = static_cast<int>(integer_field(body, "top_logprobs", 0, 0, model.max_logprobs));
    if (field(body, "top_logprobs") && !out.logprobs) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    job.n_logprobs = out.logprobs ? top : -1;
  }

  job.prompt = endpoint == Endpoint::Completions ? completion_prompt(body, model) : chat_prompt(body, model);
  if (job.prompt.empty()) throw bad("prompt", "empty prompt: nothing to condition on (the vocabulary adds no BOS)");
  if (static_cast<int>(job.prompt.size()) >= n_ctx)
    throw bad(endpoint == Endpoint::Completions ? "prompt" : "messages",
              "the prompt is " + std::to_string(job.prompt.size()) + " tokens long; it does not fit the context of " +
                  std::to_string(n_ctx) + " tokens (at least one position must remain to generate)");
  // Generated text continues the prompt's text unless the prompt has none (only BOS).
  job.resume_text = false;
  for (Token t : job.prompt)
    if (!model.engine->tokenizer().token_to_piece(t).empty()) job.resume_text = true;

  const char* max_name = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t fallback = endpoint == Endpoint::Completions ? 16 : n_ctx;
  const json* mt = field(body, max_name);
  if (mt && mt->is_number() && mt->get<double>() < 1)
    throw bad(max_name, std::string("'") + max_name + "' = " + mt->dump() + " must be >= 1");
  if (mt && mt->is_number() && mt->get<double>() > n_ctx)
    throw bad(max_name, std::string("'") + max_name + "' = " + mt->dump() + " exceeds the context length of " +
                            std::to_string(n_ctx) + " tokens");
  job.max_tokens = static_cast<int>(integer_field(body, max_name, fallback, 1, n_ctx));
  return out;
}

}  // namespace specdec::server
