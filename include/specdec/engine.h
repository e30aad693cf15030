// specdec/engine.h — request -> tokens -> speculative loop -> streamed text, with stops.
//
// The engine owns the target model, the optional draft model, the tokenizer, the drafter and
// the decoder (and so the KV caches). One Engine serves one sequence at a time; a new request
// that shares a prefix with the previous one reuses its cached K/V.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/model.h"
#include "specdec/model_free.h"
#include "specdec/sampling.h"
#include "specdec/speculative.h"
#include "specdec/tokenizer.h"

namespace specdec {

class Drafter;
class DraftModelDrafter;
class EagleLayer;
class MedusaHeads;
class LookupCache;

struct EngineOptions {
  std::string model_path;                // target GGUF (required)
  std::string draft_path;                // draft GGUF ("" = none)
  std::string heads_path;                // Medusa / EAGLE heads GGUF for --spec medusa|eagle ("" = none)
  std::optional<SpecMethod> method;      // default: draft when draft_path is set, else lookup
  SpecConfig spec;
  ModelFreeOptions model_free;
  std::string lookup_cache_path;         // "" = no persistent cache
  int tree_nodes = 0;                    // > 0: the draft model proposes token trees
  int tree_width = 0;                    // 0: the drafters' defaults (2; EAGLE when sampling: 1)
  int tree_depth = 0;                    // deepest tree level (0: the node budget)
  float tree_rank_temperature = 0.0f;    // greedy trees' ranking temperature (0: the drafters' default, 1)
  int n_ctx = 0;                         // 0: the model's context length (never larger)
  int n_threads = 0;                     // 0: physical cores
  DType kv_type = DType::F32;            // the target's and draft model's KV caches: F32 or F16
  bool repack_weights = true;            // ModelOptions::repack_weights for both models
};

struct GenerateRequest {
  std::string prompt;                    // text, encoded with BOS as the vocabulary says
  std::vector<Token> prompt_tokens;      // used instead of `prompt` when non-empty
  int max_tokens = 128;                  // >= 1
  SamplingParams sampling;
  std::vector<std::string> stop;         // stop strings: generation ends before them
  bool parse_special = false;            // match special-token text in the prompt
  bool speculative = true;               // false: plain decoding (same loop, no drafter)
};

enum class FinishReason { Length, Stop, ContextFull, Cancelled };
const char* finish_reason_name(FinishReason reason);  // "length" | "stop" | ...

// How a streamed piece of text came about (for --show-drafts).
enum class TokenOrigin : uint8_t { Plain, AcceptedDraft, Corrected, Bonus };

struct StreamPiece {
  std::string_view text;     // UTF-8, complete sequences only; stop-string prefixes held back
  TokenOrigin origin = TokenOrigin::Plain;
};
// Return false to cancel the generation (client went away).
using StreamCallback = std::function<bool(const StreamPiece&)>;

struct GenerateResult {
  std::string text;                      // generated text (stop string excluded)
  std::vector<Token> tokens;             // generated tokens (EOS / stop-completing token included)
  int n_prompt_tokens = 0;
  int n_cached_prompt_tokens = 0;        // prompt tokens whose K/V was reused
  FinishReason finish = FinishReason::Length;
  SpecStats stats;                       // this request only
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  std::string drafter_name;              // "" for plain decoding
};

class Engine {
 public:
  // Loads the models and builds the drafter. Throws Error naming the offending file/option.
  explicit Engine(const EngineOptions& options);
  ~Engine();

  // Generates for one request. Throws Error for bad requests (prompt longer than the context,
  // max_tokens < 1, ...), before any state changes. on_piece may be empty.
  GenerateResult generate(const GenerateRequest& request, const StreamCallback& on_piece = {});

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Transformer& target() { return *target_; }
  Transformer* draft_model() { return draft_model_.get(); }
  int n_ctx() const { return n_ctx_; }
  SpecMethod method() const { return method_; }
  const EngineOptions& options() const { return options_; }
  // Saves the persistent lookup cache (no-op without --lookup-cache). Throws Error on I/O failure.
  void save_lookup_cache();

  // A new drafter for `method` (nullptr for None), built the way the engine builds its own:
  // the draft model loaded at start-up (Error naming the method when there is none), the
  // tree options, the lookup options and the persistent cache `cache` (may be null). Server
  // slots call this to get one drafter per slot and method. Cost: O(1) plus the drafter's caches.
  std::unique_ptr<Drafter> make_drafter(SpecMethod method, std::shared_ptr<LookupCache> cache = nullptr);

 private:
  SpeculativeDecoder& decoder_for(bool speculative);

  EngineOptions options_;
  int n_ctx_ = 0;
  SpecMethod method_ = SpecMethod::None;
  std::unique_ptr<Transformer> target_;
  std::unique_ptr<Transformer> draft_model_;
  std::unique_ptr<MedusaHeads> medusa_;  // --spec medusa
  std::unique_ptr<EagleLayer> eagle_;    // --spec eagle
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LookupCacheFile> lookup_cache_;
  std::unique_ptr<Drafter> drafter_;
  std::unique_ptr<SpeculativeDecoder> spec_decoder_;   // with the drafter
  std::unique_ptr<SpeculativeDecoder> plain_decoder_;  // without (created on first use)
};

}  // namespace specdec
