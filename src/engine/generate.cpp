// Engine::generate: the request loop around SpeculativeDecoder::step, with end-of-generation
// tokens, stop strings and max_tokens cutting inside accepted runs, and UTF-8-safe streaming
// that holds back text which may be the start of a stop string.
#include <algorithm>

#include "specdec/engine.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string: that
// much text must not be released yet. Cost: O(sum of stop lengths^2) worst case (tiny).
size_t held_back(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const auto& stop : stops) {
    for (size_t k = std::min(stop.size() - 1, text.size()); k > hold; --k) {
      if (text.compare(text.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

// Earliest occurrence of any stop string in text at or after `from`; npos when none.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops, size_t from) {
  size_t best = std::string::npos;
  for (const auto& stop : stops) {
    size_t pos = text.find(stop, from);
    if (pos < best) best = pos;
  }
  return best;
}

TokenOrigin origin_of(const StepInfo& step, size_t index, size_t n_emitted) {
  if (step.n_drafted == 0) return TokenOrigin::Plain;
  if (index < static_cast<size_t>(step.n_accepted)) return TokenOrigin::AcceptedDraft;
  (void)n_emitted;
  return step.bonus ? TokenOrigin::Bonus : TokenOrigin::Corrected;
}

}  // namespace

GenerateResult Engine::generate(const GenerateRequest& request, const StreamCallback& on_piece) {
  if (request.max_tokens < 1) throw Error("max_tokens " + std::to_string(request.max_tokens) + " must be >= 1");
  for (const auto& stop : request.stop)
    if (stop.empty()) throw Error("empty stop string");
  std::vector<Token> prompt = request.prompt_tokens;
  if (prompt.empty()) prompt = tokenizer_->encode(request.prompt, /*add_special=*/true, request.parse_special);
  if (prompt.empty()) throw Error("empty prompt: nothing to condition on (the vocabulary adds no BOS)");
  for (Token t : prompt)
    if (t < 0 || t >= target_->config().n_vocab)
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                  std::to_string(target_->config().n_vocab) + ")");
  if (static_cast<int>(prompt.size()) >= n_ctx_)
    throw Error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                std::to_string(n_ctx_) + " tokens (at least one position must remain to generate)");

  SpeculativeDecoder& decoder = decoder_for(request.speculative);
  decoder.reset_stats();
  GenerateResult result;
  result.n_prompt_tokens = static_cast<int>(prompt.size());
  result.drafter_name = (request.speculative && drafter_) ? drafter_->name() : "";

  const double t0 = now_seconds();
  decoder.begin(prompt, request.sampling);
  const double t1 = now_seconds();
  result.prefill_seconds = t1 - t0;
  result.n_cached_prompt_tokens =
      std::max<int>(0, result.n_prompt_tokens - 1 - static_cast<int>(decoder.stats().n_prefill_tokens));

  size_t max_stop = 0;
  for (const auto& stop : request.stop) max_stop = std::max(max_stop, stop.size());

  StreamingDetokenizer detok(*tokenizer_);
  // Generated text continues the prompt: keep the leading space of the first generated word
  // unless the prompt has no text at all (only BOS).
  for (Token t : prompt)
    if (!tokenizer_->token_to_piece(t).empty()) {
      detok.resume();
      break;
    }
  std::string& text = result.text;  // all complete generated text so far
  size_t released = 0;
  bool finished = false, cancelled = false, stop_string = false;
  auto release = [&](size_t upto, TokenOrigin origin) {
    if (upto <= released) return;
    if (on_piece && !on_piece(StreamPiece{std::string_view(text).substr(released, upto - released), origin}))
      cancelled = true;
    released = upto;
  };

  int n_generated = 0;
  while (!finished && !cancelled) {
    if (decoder.remaining() <= 0) {
      result.finish = FinishReason::ContextFull;
      break;
    }
    const int n_max_new = std::min(request.max_tokens - n_generated, decoder.remaining());
    const std::vector<Token> emitted = decoder.step(n_max_new);
    const StepInfo& step = decoder.last_step();
    size_t n_kept = emitted.size();
    for (size_t i = 0; i < emitted.size(); ++i) {
      const Token token = emitted[i];
      const TokenOrigin origin = origin_of(step, i, emitted.size());
      result.tokens.push_back(token);
      ++n_generated;
      if (tokenizer_->is_end_of_generation(token)) {
        result.finish = FinishReason::Stop;
        finished = true;
      } else {
        const size_t before = text.size();
        text += detok.push(token);
        if (max_stop > 0) {
          const size_t from = before >= max_stop ? before - max_stop + 1 : 0;
          const size_t pos = find_stop(text, request.stop, from);
          if (pos != std::string::npos) {
            text.resize(pos);
            result.finish = FinishReason::Stop;
            finished = stop_string = true;
          }
        }
        if (!stop_string) release(text.size() - held_back(text, request.stop), origin);
      }
      if (!finished && n_generated >= request.max_tokens) {
        result.finish = FinishReason::Length;
        finished = true;
      }
      if (finished || cancelled) {
        n_kept = i + 1;
        break;
      }
    }
    if (n_kept < emitted.size())
      decoder.rollback(static_cast<int>(decoder.tokens().size() - (emitted.size() - n_kept)));
  }
  if (cancelled) result.finish = FinishReason::Cancelled;
  if (!stop_string && !cancelled) {
    text += detok.flush();
    release(text.size(), TokenOrigin::Plain);
  } else if (stop_string) {
    release(text.size(), TokenOrigin::Plain);  // text before the stop string
  }
  result.decode_seconds = now_seconds() - t1;
  result.stats = decoder.stats();
  return result;
}

}  // namespace specdec
