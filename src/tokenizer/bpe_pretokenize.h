// tokenizer/bpe_pretokenize.h — the regex pre-tokenizer of byte-level BPE (PCRE2, UTF + UCP).
//
// tokenizer.ggml.pre names a list of regexes (the ones llama.cpp uses for that name). They are
// applied in order, each to every piece left by the previous one: a piece is cut into the
// regex's matches and the text between them (nothing is dropped). A regex sees only its piece,
// so anchors and look-arounds stop at piece boundaries.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specdec::tok {

struct PreTokenizerConfig {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a whole piece that is a vocabulary entry is one token (llama3)
  bool add_bos = false;        // default for tokenizer.ggml.add_bos_token
};

// Config for a tokenizer.ggml.pre value ("" = llama.cpp's "default"). Error for an unknown
// name, listing the supported ones. Cost: builds a few strings.
PreTokenizerConfig pre_tokenizer_config(const std::string& pre, const std::string& file);

// Names accepted by pre_tokenizer_config (for messages and tests).
const std::vector<std::string>& supported_pre_tokenizers();

using Span = std::pair<size_t, size_t>;  // (byte offset, byte length)

class PreTokenizer {
 public:
  // Compiles the regexes (JIT when available). Error naming the pattern when one is invalid.
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Cuts `text` into pieces. requires: text is valid UTF-8 (see utf8::sanitize).
  // guarantees: pieces are non-empty, in order, and cover text exactly. Thread-safe.
  // Cost: one regex scan of the text per pattern.
  std::vector<Span> split(std::string_view text) const;

 private:
  struct Pattern;
  std::vector<Pattern> patterns_;
};

}  // namespace specdec::tok
