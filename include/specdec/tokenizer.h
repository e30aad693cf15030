// specdec/tokenizer.h — text <-> token ids, from a GGUF's tokenizer.* metadata.
//
// One interface for SentencePiece-style ("llama") and byte-level BPE ("gpt2") vocabularies.
// Invalid UTF-8 in input text is handled deterministically (see the implementation notes),
// never by crashing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

class GgufFile;
using Token = int32_t;

// Strings stored back to back in one buffer with their end offsets. A 32,000-token
// vocabulary's texts take ~0.3 MB so, against ~1 MB as std::strings (32 bytes each before any
// heap text). Views stay valid until the next push_back.
class PackedStrings {
 public:
  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  // String i. Requires i < size().
  std::string_view operator[](size_t i) const {
    const size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(chars_).substr(begin, ends_[i] - begin);
  }
  // String i; std::out_of_range for i >= size().
  std::string_view at(size_t i) const;
  // Appends s. Error when the strings would pass 4 GiB in all.
  void push_back(std::string_view s);
  void reserve(size_t n_strings, size_t n_chars);

 private:
  std::string chars_;            // all strings, back to back
  std::vector<uint32_t> ends_;   // (size) end of string i in chars_
};

enum class TokenAttr : uint8_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct SpecialTokens {
  Token bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;
  std::vector<Token> end_of_generation;  // eos, eot and other end-of-turn tokens
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Reads tokenizer.ggml.* (model, tokens, scores, token_type, merges, pre, special ids).
  // Error for an unknown tokenizer model or inconsistent tables (naming the offending entry).
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);

  // add_special: prepend BOS (and append EOS) as the vocabulary says.
  // parse_special: match control/user-defined token text in `text` as single tokens.
  virtual std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special = false) const = 0;
  // Bytes of one token as they appear in text (byte tokens -> the raw byte, control tokens -> ""
  // unless render_special). Never fails: ids out of range give "".
  virtual std::string token_to_piece(Token id, bool render_special = false) const = 0;
  // Decodes a whole sequence (the leading space of SentencePiece text is removed after BOS).
  virtual std::string decode(const std::vector<Token>& ids, bool render_special = false) const;

  int n_vocab() const { return static_cast<int>(tokens_.size()); }
  // The vocabulary's text of id; std::out_of_range for ids outside [0, n_vocab).
  std::string_view token_text(Token id) const { return tokens_.at(static_cast<size_t>(id)); }
  TokenAttr token_attr(Token id) const { return attrs_.at(static_cast<size_t>(id)); }
  const SpecialTokens& special() const { return special_; }
  bool is_end_of_generation(Token id) const;
  const std::string& model_name() const { return model_; }  // "llama" | "gpt2"

 protected:
  std::string model_;
  PackedStrings tokens_;              // (n_vocab) raw vocabulary strings
  std::vector<TokenAttr> attrs_;      // (n_vocab)
  SpecialTokens special_;
};

// Turns a stream of token pieces into UTF-8 text that never ends inside a multi-byte sequence:
// bytes of an incomplete sequence are held until it completes (or proves invalid, in which case
// each bad byte becomes U+FFFD). SentencePiece's leading space after BOS is dropped.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(Token id);
  // Returns whatever is held back (invalid tails as U+FFFD). Call at the end of generation.
  std::string flush();
  // Start of a new text (the next piece is at the start: its SentencePiece leading space is dropped).
  void reset();
  // The next piece continues earlier text (e.g. the prompt): its leading space is kept.
  void resume() { at_start_ = false; }

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;   // bytes of an incomplete UTF-8 sequence
  bool at_start_ = true;
};

}  // namespace specdec
