// specdec/text_stream.h — generated tokens -> released text (Engine::generate and the server):
// UTF-8-safe detokenization, end-of-generation tokens, stop strings cut out of the text, and
// text that may be the start of a stop string held back until it is decided.
#pragma once

#include <string>
#include <vector>

#include "specdec/tokenizer.h"

namespace specdec {

class TextStream {
 public:
  // resume: the text continues the prompt's text (SentencePiece keeps the first leading space).
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop, bool resume);

  // Adds one generated token. Returns true when generation must end here (an end-of-generation
  // token, or a stop string completed: the text is cut before it). Newly releasable text is
  // appended to *released. Cost: O(stop lengths) per token.
  bool push(Token token, std::string* released);
  // End of generation (end-of-generation token, length, context): releases what was held back
  // (invalid UTF-8 tails become U+FFFD). After a stop string: nothing more. Appends to *released.
  void finish(std::string* released);

  const std::string& text() const { return text_; }   // all text so far (stop string excluded)
  bool stopped() const { return stopped_; }  // a stop string ended the text

 private:
  void release(size_t upto, std::string* released);

  const Tokenizer& tokenizer_;
  StreamingDetokenizer detok_;
  std::vector<std::string> stop_;
  size_t max_stop_ = 0;
  std::string text_;
  size_t n_released_ = 0;
  bool stopped_ = false;
};

}  // namespace specdec
