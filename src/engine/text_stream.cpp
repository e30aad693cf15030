// engine/text_stream.cpp — see specdec/text_stream.h.
#include "specdec/text_stream.h"

#include <algorithm>

namespace specdec {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
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

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop, bool resume)
    : tokenizer_(tokenizer), detok_(tokenizer), stop_(std::move(stop)) {
  for (const auto& s : stop_) max_stop_ = std::max(max_stop_, s.size());
  if (resume) detok_.resume();
}

void TextStream::release(size_t upto, std::string* released) {
  if (upto <= n_released_) return;
  released->append(text_, n_released_, upto - n_released_);
  n_released_ = upto;
}

bool TextStream::push(Token token, std::string* released) {
  if (stopped_) return true;
  if (tokenizer_.is_end_of_generation(token)) return true;  // finish() releases the rest
  const size_t before = text_.size();
  text_ += detok_.push(token);
  if (max_stop_ > 0) {
    const size_t from = before >= max_stop_ ? before - max_stop_ + 1 : 0;
    size_t best = std::string::npos;
    for (const auto& stop : stop_) best = std::min(best, text_.find(stop, from));
    if (best != std::string::npos) {
      text_.resize(best);
      stopped_ = true;
      release(text_.size(), released);
      return true;
    }
  }
  release(text_.size() - held_back(text_, stop_), released);
  return false;
}

void TextStream::finish(std::string* released) {
  if (stopped_) return;
  text_ += detok_.flush();
  release(text_.size(), released);
}

}  // namespace specdec
