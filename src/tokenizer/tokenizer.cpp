// tokenizer/tokenizer.cpp — the model-independent part of Tokenizer: factory, vocabulary and
// special-token metadata, special-token partitioning, decode.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/tokenizer.h"
#include "tokenizer/vocab.h"

namespace specdec {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model == "llama") return tok::make_spm_tokenizer(gguf);
  if (model == "gpt2") return tok::make_bpe_tokenizer(gguf);
  throw Error(gguf.path() + ": unsupported tokenizer.ggml.model '" + model +
              "' (supported: llama = SentencePiece, gpt2 = byte-level BPE)");
}

std::string Tokenizer::decode(const std::vector<Token>& ids, bool render_special) const {
  std::string text;
  // SentencePiece text starts with the space that encode prepended: drop it from the first
  // piece that produces text (control tokens such as BOS produce none unless rendered).
  bool at_start = special_.add_space_prefix;
  for (Token id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (at_start && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      at_start = false;
    }
    text += piece;
  }
  return text;
}

bool Tokenizer::is_end_of_generation(Token id) const {
  const auto& eog = special_.end_of_generation;
  return std::find(eog.begin(), eog.end(), id) != eog.end();
}

std::string_view PackedStrings::at(size_t i) const {
  if (i >= size()) {
    throw std::out_of_range("PackedStrings::at: index " + std::to_string(i) + " of " + std::to_string(size()) + " strings");
  }
  return (*this)[i];
}

void PackedStrings::push_back(std::string_view s) {
  if (s.size() > UINT32_MAX - chars_.size()) {
    throw Error("string table: " + std::to_string(chars_.size()) + " + " + std::to_string(s.size()) +
                " bytes pass the 4 GiB limit");
  }
  chars_.append(s);
  ends_.push_back(static_cast<uint32_t>(chars_.size()));
}

void PackedStrings::reserve(size_t n_strings, size_t n_chars) {
  ends_.reserve(n_strings);
  chars_.reserve(n_chars);
}

namespace tok {
namespace {

TokenAttr attr_from_gguf_type(int32_t type, size_t id, const std::string& path) {
  switch (type) {
    case 0: return TokenAttr::Normal;  // "undefined" in older converters
    case 1: return TokenAttr::Normal;
    case 2: return TokenAttr::Unknown;
    case 3: return TokenAttr::Control;
    case 4: return TokenAttr::UserDefined;
    case 5: return TokenAttr::Unused;
    case 6: return TokenAttr::Byte;
    default:
      throw Error(path + ": tokenizer.ggml.token_type[" + std::to_string(id) + "] = " +
                  std::to_string(type) + " is not a token type (0..6)");
  }
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void TokenIndex::build(const PackedStrings& texts) {
  size_t capacity = 16;
  while (capacity < 2 * texts.size()) capacity *= 2;
  slots_.assign(capacity, -1);
  const size_t mask = capacity - 1;
  for (size_t id = 0; id < texts.size(); ++id) {
    const std::string_view text = texts[id];
    size_t slot = std::hash<std::string_view>{}(text) & mask;
    while (slots_[slot] >= 0 && texts[static_cast<size_t>(slots_[slot])] != text) slot = (slot + 1) & mask;
    slots_[slot] = static_cast<Token>(id);  // a duplicate overwrites: the last id wins
  }
}

Token TokenIndex::find(const PackedStrings& texts, std::string_view s) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t slot = std::hash<std::string_view>{}(s) & mask;; slot = (slot + 1) & mask) {
    const Token id = slots_[slot];
    if (id < 0 || texts[static_cast<size_t>(id)] == s) return id;
  }
}

void VocabTokenizer::load_vocab(const GgufFile& gguf, const std::string& model) {
  model_ = model;
  {
    const std::vector<std::string> texts = gguf.get_string_array("tokenizer.ggml.tokens");
    size_t n_chars = 0;
    for (const std::string& t : texts) n_chars += t.size();
    tokens_ = PackedStrings();
    tokens_.reserve(texts.size(), n_chars);
    for (const std::string& t : texts) tokens_.push_back(t);
  }
  const size_t n_vocab = tokens_.size();
  if (n_vocab == 0) throw Error(gguf.path() + ": tokenizer.ggml.tokens is empty");
  if (n_vocab > static_cast<size_t>(INT32_MAX)) {
    throw Error(gguf.path() + ": tokenizer.ggml.tokens has " + std::to_string(n_vocab) + " entries");
  }

  scores_.assign(n_vocab, 0.0f);
  if (gguf.has("tokenizer.ggml.scores")) {
    scores_ = gguf.get_f32_array("tokenizer.ggml.scores");
    if (scores_.size() != n_vocab) {
      throw Error(gguf.path() + ": tokenizer.ggml.scores has " + std::to_string(scores_.size()) +
                  " entries but tokenizer.ggml.tokens has " + std::to_string(n_vocab));
    }
  }
  attrs_.assign(n_vocab, TokenAttr::Normal);
  if (gguf.has("tokenizer.ggml.token_type")) {
    const std::vector<int32_t> types = gguf.get_i32_array("tokenizer.ggml.token_type");
    if (types.size() != n_vocab) {
      throw Error(gguf.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                  " entries but tokenizer.ggml.tokens has " + std::to_string(n_vocab));
    }
    for (size_t i = 0; i < n_vocab; ++i) attrs_[i] = attr_from_gguf_type(types[i], i, gguf.path());
  }
  token_to_id_.build(tokens_);

  special_ = SpecialTokens{};
  if (model == "llama") {
    special_.bos = 1; special_.eos = 2; special_.unk = 0;
    special_.add_bos = true; special_.add_eos = false; special_.add_space_prefix = true;
  } else {
    special_.add_bos = false; special_.add_eos = false; special_.add_space_prefix = false;
  }
  auto clamp = [&](Token& id) { if (id >= static_cast<Token>(n_vocab)) id = -1; };
  clamp(special_.bos); clamp(special_.eos); clamp(special_.unk);
  read_special_ids(gguf);
  special_.add_bos = gguf.get_bool_or("tokenizer.ggml.add_bos_token", special_.add_bos);
  special_.add_eos = gguf.get_bool_or("tokenizer.ggml.add_eos_token", special_.add_eos);
  if (model == "llama") {
    special_.add_space_prefix = gguf.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  }
  find_end_of_generation();

  // Special tokens matched in raw text, longest first (ties: lower id first).
  matchable_.clear();
  for (size_t i = 0; i < n_vocab; ++i) {
    const TokenAttr a = attrs_[i];
    if ((a == TokenAttr::Control || a == TokenAttr::UserDefined || a == TokenAttr::Unknown) &&
        !tokens_[i].empty()) {
      matchable_.push_back(static_cast<Token>(i));
    }
  }
  std::stable_sort(matchable_.begin(), matchable_.end(), [&](Token a, Token b) {
    return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
  });

  // llama.cpp's per-model attribute: Phi-3 special tokens swallow whitespace on their right.
  strip_flags_.assign(n_vocab, 0);
  const std::string name = lowercase(gguf.get_string_or("general.name", ""));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (Token id : matchable_) strip_flags_[static_cast<size_t>(id)] |= kRstrip;
    if (Token id = find_token("</s>"); id >= 0) strip_flags_[static_cast<size_t>(id)] |= kRstrip;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (Token id = find_token(t); id >= 0) strip_flags_[static_cast<size_t>(id)] &= ~kRstrip;
    }
  }
}

void VocabTokenizer::read_special_ids(const GgufFile& gguf) {
  const int64_t n_vocab = static_cast<int64_t>(tokens_.size());
  auto read = [&](const char* key, Token& id) {
    if (!gguf.has(key)) return;
    const int64_t v = gguf.get_i64(key);
    if (v >= 0 && v < n_vocab) id = static_cast<Token>(v);  // others (e.g. u32 max) mean "none"
  };
  read("tokenizer.ggml.bos_token_id", special_.bos);
  read("tokenizer.ggml.eos_token_id", special_.eos);
  read("tokenizer.ggml.unknown_token_id", special_.unk);
  read("tokenizer.ggml.padding_token_id", special_.pad);
  read("tokenizer.ggml.eot_token_id", special_.eot);
  Token eom = -1;
  read("tokenizer.ggml.eom_token_id", eom);
  if (eom >= 0) special_.end_of_generation.push_back(eom);
}

void VocabTokenizer::find_end_of_generation() {
  // Token texts that end a turn in common chat formats (the list llama.cpp recognises).
  static const char* const kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                          "<|endoftext|>", "<EOT>", "_<EOT>",
                                          ("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")};
  static const char* const kEogTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                          "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                                          "<|end_of_text|>"};
  auto& eog = special_.end_of_generation;
  auto add = [&](Token id) {
    if (id >= 0 && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
  };
  // Tokens recognised by their text are made control tokens (never printed as text, never
  // matched without parse_special), as llama.cpp does; ids from metadata keep their type.
  auto make_control = [&](Token id) {
    TokenAttr& a = attrs_[static_cast<size_t>(id)];
    if (a == TokenAttr::Normal || a == TokenAttr::UserDefined) a = TokenAttr::Control;
  };
  if (special_.eot < 0) {
    for (const char* text : kEotTexts) {
      if (Token id = find_token(text); id >= 0) { special_.eot = id; make_control(id); break; }
    }
  }
  add(special_.eos);
  add(special_.eot);
  for (const char* text : kEogTexts) {
    if (Token id = find_token(text); id >= 0) { add(id); make_control(id); }
  }
  std::sort(eog.begin(), eog.end());
}

std::vector<Fragment> VocabTokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({0, text.size(), -1});
  std::vector<Fragment> next;
  for (Token id : matchable_) {
    const TokenAttr attr = attrs_[static_cast<size_t>(id)];
    if (!parse_special && (attr == TokenAttr::Control || attr == TokenAttr::Unknown)) continue;
    const std::string_view needle = tokens_[static_cast<size_t>(id)];
    if (text.find(needle) == std::string_view::npos) continue;
    const uint8_t strip = strip_flags_[static_cast<size_t>(id)];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) { next.push_back(f); continue; }
      size_t base = f.offset, len = f.length;
      while (len > 0) {
        const size_t found = text.substr(base, len).find(needle);
        if (found == std::string_view::npos) break;
        size_t left_len = found;
        if (strip & kLstrip) {
          while (left_len > 0 && std::isspace(static_cast<unsigned char>(text[base + left_len - 1]))) --left_len;
        }
        if (left_len > 0) next.push_back({base, left_len, -1});
        next.push_back({0, 0, id});
        size_t right = base + found + needle.size();
        size_t right_len = base + len - right;
        if (strip & kRstrip) {
          while (right_len > 0 && std::isspace(static_cast<unsigned char>(text[right]))) { ++right; --right_len; }
        }
        base = right;
        len = right_len;
      }
      if (len > 0) next.push_back({base, len, -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace tok
}  // namespace specdec
