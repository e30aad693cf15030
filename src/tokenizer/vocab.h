// tokenizer/vocab.h — what SentencePiece and byte-level BPE tokenizers share (internal).
//
// VocabTokenizer loads tokenizer.ggml.{tokens,scores,token_type} and the special-token metadata,
// finds the end-of-generation tokens, and splits input text around special tokens the way
// llama.cpp does (tokenizer_st_partition): control/unknown tokens only when parse_special,
// user-defined tokens always; longer token texts are matched first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "specdec/tokenizer.h"

namespace specdec::tok {

// A piece of the input: raw text [offset, offset + length) or one special token (token >= 0).
struct Fragment {
  size_t offset = 0;
  size_t length = 0;
  Token token = -1;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Text -> id over a PackedStrings table: open addressing with linear probing, one int32 slot
// per entry at a load of at most 1/2 (256 KiB for 32,000 tokens, against ~2.3 MB as an
// unordered_map of std::string nodes). The texts are not copied: find() compares against them.
class TokenIndex {
 public:
  // Indexes texts[0 .. size); of duplicates the last id wins, as in llama.cpp.
  void build(const PackedStrings& texts);
  // Id whose text is s, -1 when absent. requires: texts is the table build() saw.
  // Cost: one hash of s and, on average, under two comparisons.
  Token find(const PackedStrings& texts, std::string_view s) const;

 private:
  std::vector<Token> slots_;  // (capacity, a power of two) id, or -1 for an empty slot
};

class VocabTokenizer : public Tokenizer {
 public:
  // Id of a vocabulary string, -1 when absent (duplicates: the last id wins, as in llama.cpp).
  // Cost: one hash lookup.
  Token find_token(std::string_view text) const { return token_to_id_.find(tokens_, text); }

 protected:
  // Reads tokens (required, non-empty), scores and token types (optional, length n_vocab),
  // special ids and add_bos/add_eos/add_space_prefix. `model` is "llama" or "gpt2" (sets the
  // defaults: SentencePiece bos 1 / eos 2 / unk 0 / add_bos; BPE none). Ids out of range in the
  // metadata are ignored like llama.cpp does (e.g. 4294967295 = "none").
  // Error names the key and the offending entry for inconsistent tables.
  void load_vocab(const GgufFile& gguf, const std::string& model);

  // Splits `text` around special tokens. requires: load_vocab ran. guarantees: fragments cover
  // the text in order, except whitespace removed next to tokens flagged lstrip/rstrip.
  // Empty text -> no fragments. Cost: O(n_special_present * n).
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

  std::vector<float> scores_;        // (n_vocab) SentencePiece merge scores, 0 when absent
  TokenIndex token_to_id_;           // text -> id
  std::vector<Token> matchable_;     // control/user-defined/unknown ids, longest text first
  std::vector<uint8_t> strip_flags_; // (n_vocab) kLstrip | kRstrip around matched specials
  static constexpr uint8_t kLstrip = 1, kRstrip = 2;

 private:
  void read_special_ids(const GgufFile& gguf);
  void find_end_of_generation();
};

// Model-specific constructors (spm.cpp, bpe.cpp); Tokenizer::from_gguf dispatches on
// tokenizer.ggml.model.
std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile& gguf);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile& gguf);

}  // namespace specdec::tok
