// Engine::generate: the request loop around SpeculativeDecoder::step, with end-of-generation
// tokens, stop strings and max_tokens cutting inside accepted runs, and UTF-8-safe streaming
// that holds back text which may be the start of a stop string.
#include <algorithm>

#include "specdec/engine.h"
#include "specdec/error.h"
#include "specdec/text_stream.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

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

  // Generated text continues the prompt: keep the leading space of the first generated word
  // unless the prompt has no text at all (only BOS).
  bool resume = false;
  for (Token t : prompt) resume = resume || !tokenizer_->token_to_piece(t).empty();
  TextStream text(*tokenizer_, request.stop, resume);
  std::string released;  // text that became final with the last token
  bool cancelled = false;
  auto emit = [&](TokenOrigin origin) {
    if (!released.empty() && on_piece && !on_piece(StreamPiece{released, origin})) cancelled = true;
    released.clear();
  };

  int n_generated = 0;
  bool finished = false;
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
      result.tokens.push_back(emitted[i]);
      ++n_generated;
      if (text.push(emitted[i], &released)) {  // end-of-generation token or stop string
        result.finish = FinishReason::Stop;
        finished = true;
      } else if (n_generated >= request.max_tokens) {
        result.finish = FinishReason::Length;
        finished = true;
      }
      emit(origin_of(step, i, emitted.size()));
      if (finished || cancelled) {
        n_kept = i + 1;
        break;
      }
    }
    // A stop inside an accepted run: the committed sequence ends at the stopping token.
    if (n_kept < emitted.size())
      decoder.rollback(static_cast<int>(decoder.tokens().size() - (emitted.size() - n_kept)));
  }
  if (cancelled) {
    result.finish = FinishReason::Cancelled;
  } else {
    text.finish(&released);  // held-back text and invalid UTF-8 tails, unless a stop string ended it
    emit(TokenOrigin::Plain);
  }
  result.text = text.text();
  result.decode_seconds = now_seconds() - t1;
  result.stats = decoder.stats();
  return result;
}

}  // namespace specdec
