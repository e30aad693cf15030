// tokenizer/spm.cpp — SentencePiece-style tokenizer (GGUF tokenizer.ggml.model = "llama").
//
// Encoding follows llama.cpp's llm_tokenizer_spm: a space is prepended to the first text
// fragment (add_space_prefix), spaces become U+2581 "▁", the text is cut into UTF-8 characters
// and adjacent symbols are merged greedily by the score of the vocabulary entry they form
// (highest score first, leftmost first on ties). Symbols that are not vocabulary entries fall
// back to byte tokens <0xXX>.
// Invalid UTF-8: each byte that is not part of a valid sequence is its own symbol, and so
// becomes its byte token (decode gives the same bytes back). Deterministic, never fails.
#include <cstdio>
#include <queue>
#include <string>
#include <vector>

#include "specdec/error.h"
#include "specdec/gguf.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace specdec::tok {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Parses "<0xAB>" -> 0xAB; -1 when `text` is not of that form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else return -1;
    value = value * 16 + digit;
  }
  return value;
}

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(const GgufFile& gguf) {
    load_vocab(gguf, "llama");
    const size_t n_vocab = tokens_.size();
    pieces_.reserve(n_vocab, n_vocab * 8);
    for (size_t id = 0; id < n_vocab; ++id) {
      const std::string_view text = tokens_[id];
      std::string piece;
      switch (attrs_[id]) {
        case TokenAttr::Normal:
        case TokenAttr::UserDefined:
          for (size_t pos = 0; pos < text.size();) {
            if (text.substr(pos, kSpaceMarker.size()) == kSpaceMarker) {
              piece.push_back(' ');
              pos += kSpaceMarker.size();
            } else {
              piece.push_back(text[pos++]);
            }
          }
          break;
        case TokenAttr::Byte: {
          const int value = parse_byte_token(text);
          if (value < 0) {
            throw Error(gguf.path() + ": token " + std::to_string(id) + " '" + std::string(text) +
                        "' has type byte but is not of the form <0xXX>");
          }
          piece = std::string(1, static_cast<char>(value));
          break;
        }
        default:
          break;  // control, unknown, unused: no text unless rendered
      }
      pieces_.push_back(piece);
    }
    // Byte fallback: <0xXX>, else the one-byte token, else <unk> (llama.cpp's order).
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      Token id = find_token(name);
      if (id < 0) id = find_token(std::string(1, static_cast<char>(b)));
      if (id < 0) id = special_.unk;
      byte_tokens_[b] = id;
    }
  }

  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special) const override {
    std::vector<Token> out;
    if (add_special && special_.add_bos && special_.bos >= 0) out.push_back(special_.bos);
    bool prev_special = true;  // the first text fragment gets the space prefix
    for (const Fragment& f : partition(text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string escaped;
      escaped.reserve(f.length + 16);
      if (special_.add_space_prefix && prev_special) escaped.append(kSpaceMarker);
      for (char c : text.substr(f.offset, f.length)) {
        if (c == ' ') escaped.append(kSpaceMarker);
        else escaped.push_back(c);
      }
      encode_fragment(escaped, out);
      prev_special = false;
    }
    if (add_special && special_.add_eos && special_.eos >= 0) out.push_back(special_.eos);
    return out;
  }

  std::string token_to_piece(Token id, bool render_special) const override {
    if (id < 0 || id >= n_vocab()) return "";
    const auto i = static_cast<size_t>(id);
    if (render_special) {
      if (attrs_[i] == TokenAttr::Control) return std::string(tokens_[i]);
      if (attrs_[i] == TokenAttr::Unknown) return "\xE2\x96\x85";  // U+2585, as llama.cpp renders <unk>
    }
    return std::string(pieces_[i]);
  }

 private:
  struct Symbol {
    int prev, next;  // neighbours in the linked list, -1 at the ends
    size_t start;    // byte offset in the escaped text
    size_t n;        // bytes; 0 once merged into its left neighbour
  };
  struct Bigram {
    int left, right;
    float score;
    size_t size;  // bytes of the merged text (detects stale entries)
  };
  struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  using Queue = std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder>;

  void try_add_bigram(std::string_view text, const std::vector<Symbol>& symbols, int left, int right,
                      Queue& queue) const {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const Token id = find_token(text.substr(l.start, l.n + r.n));
    if (id < 0) return;
    queue.push({left, right, scores_[static_cast<size_t>(id)], l.n + r.n});
  }

  // Tokenizes one escaped fragment. Cost: O(n log n) hash lookups of substrings.
  void encode_fragment(std::string_view text, std::vector<Token>& out) const {
    std::vector<Symbol> symbols;  // (n_chars)
    symbols.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const utf8::Seq seq = utf8::inspect(text, pos);
      const size_t n = seq.status == utf8::SeqStatus::Valid ? seq.length : 1;
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({index - 1, pos + n == text.size() ? -1 : index + 1, pos, n});
      pos += n;
    }
    Queue queue;
    for (size_t i = 1; i < symbols.size(); ++i) {
      try_add_bigram(text, symbols, static_cast<int>(i - 1), static_cast<int>(i), queue);
    }
    while (!queue.empty()) {
      const Bigram bigram = queue.top();
      queue.pop();
      Symbol& left = symbols[static_cast<size_t>(bigram.left)];
      Symbol& right = symbols[static_cast<size_t>(bigram.right)];
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = bigram.left;
      try_add_bigram(text, symbols, left.prev, bigram.left, queue);
      try_add_bigram(text, symbols, bigram.left, left.next, queue);
    }
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
      const Symbol& s = symbols[static_cast<size_t>(i)];
      const Token id = find_token(text.substr(s.start, s.n));
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (size_t k = 0; k < s.n; ++k) {
        const Token byte_id = byte_tokens_[static_cast<unsigned char>(text[s.start + k])];
        if (byte_id >= 0) out.push_back(byte_id);
      }
    }
  }

  PackedStrings pieces_;             // (n_vocab) text of each token as it appears in output
  Token byte_tokens_[256];           // byte -> fallback token (-1: none)
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile& gguf) {
  return std::make_unique<SpmTokenizer>(gguf);
}

}  // namespace specdec::tok
