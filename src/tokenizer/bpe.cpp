// tokenizer/bpe.cpp — byte-level BPE tokenizer (GGUF tokenizer.ggml.model = "gpt2").
//
// Encoding (llama.cpp-compatible): special tokens are split off first (vocab.h), each text
// fragment is cut by the pre-tokenizer regexes (bpe_pretokenize.h), every piece is mapped byte
// by byte to GPT-2's printable code points, and adjacent symbols are merged by merge rank
// (lowest rank first, leftmost first on ties) with a priority queue. Results per piece are
// cached (pieces repeat a lot in natural text).
// Invalid UTF-8: the regexes see each byte that is not part of a valid sequence as U+FFFD, but
// the piece keeps the raw byte, which is encoded like any other byte (every byte has a token in a
// byte-level vocabulary), so decode(encode(x)) == x for any bytes. Deterministic, never fails.
// Exception: vocabularies that hold some byte characters only as user-defined tokens
// (deepseek-coder's "À" etc.) decode those tokens as their text (as llama.cpp does), so there
// the round trip is exact for valid UTF-8 only.
// Decode applies no "clean up tokenization spaces" pass: decode(encode(x)) == x.
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "specdec/error.h"
#include "specdec/gguf.h"
#include "tokenizer/bpe_pretokenize.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace specdec::tok {
namespace {

class BpeTokenizer final : public VocabTokenizer {
 public:
  explicit BpeTokenizer(const GgufFile& gguf)
      : config_(pre_tokenizer_config(gguf.get_string_or("tokenizer.ggml.pre", ""), gguf.path())),
        pre_(config_.regexes) {
    load_vocab(gguf, "gpt2");
    if (!gguf.has("tokenizer.ggml.add_bos_token")) special_.add_bos = config_.add_bos && special_.bos >= 0;
    load_merges(gguf);
    const size_t n_vocab = tokens_.size();
    pieces_.reserve(n_vocab, n_vocab * 8);
    for (size_t id = 0; id < n_vocab; ++id) {
      switch (attrs_[id]) {
        case TokenAttr::Normal:
        case TokenAttr::Byte: pieces_.push_back(byte_level_decode(tokens_[id])); break;
        case TokenAttr::UserDefined: pieces_.push_back(tokens_[id]); break;  // stored as plain text
        default: pieces_.push_back({}); break;  // control, unknown, unused: no text unless rendered
      }
    }
    for (int b = 0; b < 256; ++b) byte_tokens_[b] = find_token(byte_to_utf8(static_cast<uint8_t>(b)));
  }

  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special) const override {
    std::vector<Token> out;
    if (add_special && special_.add_bos && special_.bos >= 0) out.push_back(special_.bos);
    for (const Fragment& f : partition(text, parse_special)) {
      if (f.token >= 0) out.push_back(f.token);
      else encode_text(text.substr(f.offset, f.length), out);
    }
    if (add_special && special_.add_eos && special_.eos >= 0) out.push_back(special_.eos);
    return out;
  }

  std::string token_to_piece(Token id, bool render_special) const override {
    if (id < 0 || id >= n_vocab()) return "";
    const auto i = static_cast<size_t>(id);
    if (render_special && (attrs_[i] == TokenAttr::Control || attrs_[i] == TokenAttr::Unknown)) {
      return std::string(tokens_[i]);
    }
    return std::string(pieces_[i]);
  }

 private:
  struct Merge {
    int rank;
    Token merged;
  };
  static uint64_t pair_key(Token left, Token right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  // Reads tokenizer.ggml.merges ("left right", rank = index). Every part and the merged text
  // must be vocabulary entries. Error names the merge.
  void load_merges(const GgufFile& gguf) {
    const std::vector<std::string> merges = gguf.get_string_array("tokenizer.ggml.merges");
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& m = merges[rank];
      const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (space == std::string::npos) {
        throw Error(gguf.path() + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + m +
                    "' is not of the form 'left right'");
      }
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      const Token l = find_token(left), r = find_token(right), merged = find_token(left + right);
      if (l < 0 || r < 0 || merged < 0) {
        const std::string& missing = l < 0 ? left : r < 0 ? right : left + right;
        throw Error(gguf.path() + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + m +
                    "' references '" + missing + "', which is not in tokenizer.ggml.tokens");
      }
      merges_.emplace(pair_key(l, r), Merge{static_cast<int>(rank), merged});  // first rank wins
    }
  }

  // Pre-tokenizes one text fragment and appends its tokens.
  void encode_text(std::string_view text, std::vector<Token>& out) const {
    if (utf8::is_valid(text)) {
      for (const auto& [offset, length] : pre_.split(text)) encode_piece(text.substr(offset, length), out);
      return;
    }
    // The regexes need valid UTF-8: split a copy with U+FFFD for each bad byte, then map the
    // pieces back to the original bytes.
    std::string sanitized;
    std::vector<size_t> original_offset;  // (sanitized.size() + 1) offset in `text` of each byte
    sanitized.reserve(text.size() + 16);
    original_offset.reserve(text.size() + 16);
    for (size_t pos = 0; pos < text.size();) {
      const utf8::Seq seq = utf8::inspect(text, pos);
      const std::string_view ch = seq.status == utf8::SeqStatus::Valid ? text.substr(pos, seq.length)
                                                                        : utf8::kReplacementUtf8;
      sanitized.append(ch);
      original_offset.insert(original_offset.end(), ch.size(), pos);
      pos += seq.status == utf8::SeqStatus::Valid ? seq.length : 1;
    }
    original_offset.push_back(text.size());
    for (const auto& [offset, length] : pre_.split(sanitized)) {
      const size_t begin = original_offset[offset], end = original_offset[offset + length];
      encode_piece(text.substr(begin, end - begin), out);
    }
  }

  // Merges one pre-tokenized piece (raw bytes). Cost: O(n log n) in the piece length; cached.
  void encode_piece(std::string_view piece, std::vector<Token>& out) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(piece);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<Token> tokens;
    merge_piece(piece, tokens);
    out.insert(out.end(), tokens.begin(), tokens.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::move(tokens));
  }

  void merge_piece(std::string_view piece, std::vector<Token>& out) const {
    if (config_.ignore_merges) {
      std::string encoded;
      for (char c : piece) encoded += byte_to_utf8(static_cast<uint8_t>(c));
      if (Token id = find_token(encoded); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    // One symbol per byte (each byte is one code point of the byte-level text).
    struct Symbol {
      int prev, next;
      uint32_t n;  // bytes covered; 0 once merged into the left neighbour
      Token id;    // vocabulary id of the covered text (-1: byte without a token)
    };
    struct Bigram {
      int left, right;
      int rank;
      uint32_t size;
      Token merged;
    };
    struct Order {
      bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
      }
    };
    const int n = static_cast<int>(piece.size());
    std::vector<Symbol> symbols(piece.size());  // (n_bytes)
    for (int i = 0; i < n; ++i) {
      symbols[static_cast<size_t>(i)] = {i - 1, i + 1 == n ? -1 : i + 1, 1,
                                         byte_tokens_[static_cast<unsigned char>(piece[static_cast<size_t>(i)])]};
    }
    std::priority_queue<Bigram, std::vector<Bigram>, Order> queue;
    auto add_bigram = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = symbols[static_cast<size_t>(left)];
      const Symbol& r = symbols[static_cast<size_t>(right)];
      if (l.id < 0 || r.id < 0) return;
      auto it = merges_.find(pair_key(l.id, r.id));
      if (it == merges_.end()) return;
      queue.push({left, right, it->second.rank, l.n + r.n, it->second.merged});
    };
    for (int i = 1; i < n; ++i) add_bigram(i - 1, i);
    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& left = symbols[static_cast<size_t>(b.left)];
      Symbol& right = symbols[static_cast<size_t>(b.right)];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
      left.n += right.n;
      left.id = b.merged;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = b.left;
      add_bigram(left.prev, b.left);
      add_bigram(b.left, left.next);
    }
    for (int i = n > 0 ? 0 : -1; i != -1; i = symbols[static_cast<size_t>(i)].next) {
      const Token id = symbols[static_cast<size_t>(i)].id;
      if (id >= 0) out.push_back(id);
      else if (special_.unk >= 0) out.push_back(special_.unk);  // vocabulary lacks this byte
    }
  }

  static constexpr size_t kMaxCacheEntries = 1u << 17;

  PreTokenizerConfig config_;
  PreTokenizer pre_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and result
  PackedStrings pieces_;                        // (n_vocab) bytes of each token
  Token byte_tokens_[256];                      // byte -> token of its one-character text
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<Token>, StringHash, std::equal_to<>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile& gguf) {
  return std::make_unique<BpeTokenizer>(gguf);
}

}  // namespace specdec::tok
