// server/request_parse.h — OpenAI request JSON -> a validated, tokenized job.
#pragma once

#include <string>

#include "server/api_types.h"

namespace specdec::server {

// Parses and validates a /v1/completions or /v1/chat/completions body: types, ranges, the
// model name, the chat template, the prompt length against the context. Throws ApiError
// (400 naming the field, 404 for an unknown model) before anything is queued.
// Cost: JSON parse + tokenization of the prompt. Thread-safe (the tokenizer is read-only).
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const ServedModel& model);

}  // namespace specdec::server
