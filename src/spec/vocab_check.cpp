// spec/vocab_check.cpp — can a draft model's token ids be verified by the target? (issue 3)
#include <string>

#include "specdec/draft_model.h"
#include "specdec/error.h"

namespace specdec {

VocabView VocabView::of(const Tokenizer& tokenizer) {
  VocabView view;
  view.model = tokenizer.model_name();
  view.n_vocab = tokenizer.n_vocab();
  view.text = [&tokenizer](Token id) { return std::string(tokenizer.token_text(id)); };
  view.special = tokenizer.special();
  return view;
}

void check_vocab_compatible(const VocabView& target, const VocabView& draft, int max_shorter) {
  if (target.model != draft.model) {
    throw Error("draft tokenizer model '" + draft.model + "' differs from the target's '" + target.model + "'");
  }
  if (draft.n_vocab < target.n_vocab - max_shorter) {
    throw Error("draft vocabulary has " + std::to_string(draft.n_vocab) + " tokens, the target's " +
                std::to_string(target.n_vocab) + ": more than " + std::to_string(max_shorter) + " missing");
  }
  const struct {
    const char* name;
    Token target_id, draft_id;
  } specials[] = {{"bos", target.special.bos, draft.special.bos},
                  {"eos", target.special.eos, draft.special.eos},
                  {"eot", target.special.eot, draft.special.eot}};
  for (const auto& s : specials) {
    if (s.target_id != s.draft_id) {
      throw Error(std::string("draft ") + s.name + " token id " + std::to_string(s.draft_id) +
                  " differs from the target's " + std::to_string(s.target_id));
    }
  }
  const int n_common = std::min(target.n_vocab, draft.n_vocab);
  for (Token id = 0; id < n_common; ++id) {
    const std::string t = target.text(id), d = draft.text(id);
    if (t != d) {
      throw Error("draft and target vocabularies differ at token " + std::to_string(id) + ": draft '" + d +
                  "', target '" + t + "'");
    }
  }
}

}  // namespace specdec
