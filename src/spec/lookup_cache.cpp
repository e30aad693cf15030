// LookupCache: persistent n-gram statistics, versioned binary file with checksum.
#include "specdec/lookup_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "specdec/error.h"
#include "specdec/tokenizer.h"

namespace specdec {

namespace {

constexpr char kMagic[8] = {'S', 'D', 'N', 'G', 'R', 'A', 'M', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4 + 4 + 8;
constexpr size_t kEntryHeaderBytes = 8 + 4;
constexpr size_t kNextBytes = 4 + 4;

void check_config(const LookupCacheConfig& c) {
  if (c.min_order < 2 || c.max_order > 16 || c.min_order > c.max_order) {
    throw Error("lookup cache: n-gram orders must satisfy 2 <= min_order <= max_order <= 16, got " +
                std::to_string(c.min_order) + ".." + std::to_string(c.max_order));
  }
}

// Little-endian writer into a byte buffer.
class Writer {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) buf_.push_back(b[i]);  // (insert() trips a GCC 12 false warning)
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& buffer() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Bounds-checked little-endian reader; every failure names the file and the offset.
class Reader {
 public:
  Reader(const std::vector<uint8_t>& buf, size_t end, const std::string& path)
      : buf_(buf), end_(end), path_(path) {}
  void need(size_t n, const char* what) const {
    if (end_ - pos_ < n) {
      throw Error("lookup cache " + path_ + ": truncated while reading " + what + " at byte " +
                  std::to_string(pos_) + " (" + std::to_string(end_) + " bytes of data)");
    }
  }
  uint32_t u32(const char* what) {
    need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(buf_[pos_ + static_cast<size_t>(i)]) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* what) {
    need(8, what);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(buf_[pos_ + static_cast<size_t>(i)]) << (8 * i);
    pos_ += 8;
    return v;
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  const uint8_t* here() const { return buf_.data() + pos_; }
  void skip(size_t n) { pos_ += n; }

 private:
  const std::vector<uint8_t>& buf_;
  size_t end_;
  size_t pos_ = 0;
  const std::string& path_;
};

std::string hex64(uint64_t v) {
  char s[19];
  std::snprintf(s, sizeof s, "0x%016llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace

uint64_t fnv1a64(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t vocab_fingerprint(std::span<const std::string> token_texts) {
  uint64_t n = token_texts.size();
  uint64_t h = fnv1a64(reinterpret_cast<const uint8_t*>(&n), sizeof n);
  for (const std::string& text : token_texts) {
    // Length then bytes, so ("ab","c") and ("a","bc") differ.
    uint64_t len = text.size();
    h ^= fnv1a64(reinterpret_cast<const uint8_t*>(&len), sizeof len);
    h *= 0x100000001b3ULL;
    h ^= fnv1a64(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t vocab_fingerprint(const Tokenizer& tokenizer) {
  std::vector<std::string> texts;  // (n_vocab)
  texts.reserve(static_cast<size_t>(tokenizer.n_vocab()));
  for (Token id = 0; id < tokenizer.n_vocab(); ++id) texts.emplace_back(tokenizer.token_text(id));
  return vocab_fingerprint(texts);
}

LookupCache::LookupCache(int n_vocab, uint64_t vocab_fingerprint, LookupCacheConfig config)
    : n_vocab_(n_vocab), fingerprint_(vocab_fingerprint), config_(config) {
  check_config(config_);
  if (n_vocab_ < 1) throw Error("lookup cache: vocabulary size must be >= 1, got " + std::to_string(n_vocab_));
}

void LookupCache::add_sequence(std::span<const Token> tokens, size_t first) {
  for (size_t pos = first; pos < tokens.size(); ++pos) {
    const Token next = tokens[pos];
    if (next < 0 || next >= n_vocab_) continue;
    for (int order = config_.min_order; order <= config_.max_order; ++order) {
      const size_t n_ctx = static_cast<size_t>(order - 1);
      if (pos < n_ctx) break;
      table_.add(ngram_key(tokens.subspan(pos - n_ctx, n_ctx)), next, 1, 0, config_.max_next);
    }
  }
  if (table_.size() > config_.max_contexts) prune();
}

void LookupCache::prune() {
  // Drop the rarest contexts until at most 3/4 of the budget is used; depends only on counts.
  const size_t target = config_.max_contexts - config_.max_contexts / 4;
  auto& entries = table_.mutable_entries();
  for (uint32_t threshold = 1; entries.size() > target; threshold *= 2) {
    std::erase_if(entries, [&](const auto& kv) { return kv.second.total <= threshold; });
  }
}

NgramPrediction LookupCache::predict_order(std::span<const Token> tail, int order) const {
  const size_t n_ctx = static_cast<size_t>(order - 1);
  if (order < config_.min_order || order > config_.max_order || tail.size() < n_ctx) return {};
  NgramPrediction p = table_.best(ngram_key(tail.last(n_ctx)));
  if (p.token < 0 || p.total < config_.min_count) return {};
  p.order = order;
  return p;
}

NgramPrediction LookupCache::predict(std::span<const Token> tail) const {
  for (int order = config_.max_order; order >= config_.min_order; --order) {
    NgramPrediction p = predict_order(tail, order);
    if (p.token >= 0) return p;
  }
  return {};
}

void LookupCache::save(const std::string& path) const {
  // Deterministic content: entries by key, next tokens by id.
  std::vector<uint64_t> keys;  // (n_contexts)
  keys.reserve(table_.size());
  for (const auto& kv : table_.entries()) keys.push_back(kv.first);
  std::sort(keys.begin(), keys.end());

  Writer w;
  w.bytes(kMagic, sizeof kMagic);
  w.u32(kVersion);
  w.u32(static_cast<uint32_t>(n_vocab_));
  w.u64(fingerprint_);
  w.u32(static_cast<uint32_t>(config_.min_order));
  w.u32(static_cast<uint32_t>(config_.max_order));
  w.u64(keys.size());
  std::vector<NgramTable::Next> next;  // (n_distinct_next) of one context
  for (uint64_t key : keys) {
    next = table_.entries().at(key).next;
    std::sort(next.begin(), next.end(), [](const auto& a, const auto& b) { return a.token < b.token; });
    w.u64(key);
    w.u32(static_cast<uint32_t>(next.size()));
    for (const auto& n : next) {
      w.u32(static_cast<uint32_t>(n.token));
      w.u32(n.count);
    }
  }
  w.u64(fnv1a64(w.buffer().data(), w.buffer().size()));

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("lookup cache: cannot create " + tmp + ": " + std::strerror(errno));
    out.write(reinterpret_cast<const char*>(w.buffer().data()), static_cast<std::streamsize>(w.buffer().size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw Error("lookup cache: cannot write " + tmp + " (" + std::to_string(w.buffer().size()) + " bytes)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw Error("lookup cache: cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
}

LookupCache LookupCache::load(const std::string& path, int n_vocab, uint64_t vocab_fingerprint,
                              LookupCacheConfig config) {
  LookupCache cache(n_vocab, vocab_fingerprint, config);
  // A directory opens as a stream whose size reads as huge (bad_alloc), a FIFO blocks: refuse both.
  std::error_code type_error;
  if (std::filesystem::exists(path, type_error) && !std::filesystem::is_regular_file(path, type_error))
    throw Error("lookup cache: '" + path + "' is not a regular file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("lookup cache: cannot open " + path + ": " + std::strerror(errno));
  const std::streamoff file_size = in.tellg();
  if (file_size < 0) throw Error("lookup cache: cannot read the size of " + path);
  std::vector<uint8_t> buf(static_cast<size_t>(file_size));  // (file size)
  in.seekg(0);
  in.read(reinterpret_cast<char*>(buf.data()), file_size);
  if (!in) throw Error("lookup cache: cannot read " + path + " (" + std::to_string(file_size) + " bytes)");

  if (buf.size() < kHeaderBytes + 8) {
    throw Error("lookup cache " + path + ": too short to be a lookup cache (" + std::to_string(buf.size()) + " bytes)");
  }
  if (std::memcmp(buf.data(), kMagic, sizeof kMagic) != 0) {
    throw Error("lookup cache " + path + ": not a specdec lookup cache (bad magic)");
  }
  const size_t data_end = buf.size() - 8;
  Reader r(buf, data_end, path);
  r.skip(sizeof kMagic);
  const uint32_t version = r.u32("version");
  if (version != kVersion) {
    throw Error("lookup cache " + path + ": unsupported version " + std::to_string(version) + " (this build reads " +
                std::to_string(kVersion) + ")");
  }
  // Checksum before anything else is trusted.
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= static_cast<uint64_t>(buf[data_end + static_cast<size_t>(i)]) << (8 * i);
  const uint64_t actual = fnv1a64(buf.data(), data_end);
  if (stored != actual) {
    throw Error("lookup cache " + path + ": checksum mismatch (stored " + hex64(stored) + ", computed " +
                hex64(actual) + "): the file is corrupt or truncated");
  }
  const uint32_t file_vocab = r.u32("n_vocab");
  const uint64_t file_fp = r.u64("vocab fingerprint");
  if (file_vocab != static_cast<uint32_t>(n_vocab)) {
    throw Error("lookup cache " + path + ": built for a vocabulary of " + std::to_string(file_vocab) +
                " tokens, the model has " + std::to_string(n_vocab));
  }
  if (file_fp != vocab_fingerprint) {
    throw Error("lookup cache " + path + ": built for a different tokenizer (fingerprint " + hex64(file_fp) +
                ", the model's is " + hex64(vocab_fingerprint) + ")");
  }
  const uint32_t file_min_order = r.u32("min_order");
  const uint32_t file_max_order = r.u32("max_order");
  if (file_min_order < 2 || file_max_order > 16 || file_min_order > file_max_order) {
    throw Error("lookup cache " + path + ": invalid n-gram orders " + std::to_string(file_min_order) + ".." +
                std::to_string(file_max_order));
  }
  const uint64_t n_entries = r.u64("n_entries");
  if (n_entries > r.remaining() / (kEntryHeaderBytes + kNextBytes)) {
    throw Error("lookup cache " + path + ": " + std::to_string(n_entries) + " entries cannot fit in " +
                std::to_string(buf.size()) + " bytes");
  }
  auto& entries = cache.table_.mutable_entries();
  entries.reserve(static_cast<size_t>(n_entries));
  for (uint64_t e = 0; e < n_entries; ++e) {
    const uint64_t key = r.u64("entry key");
    const uint32_t n_next = r.u32("entry size");
    if (n_next == 0 || n_next > r.remaining() / kNextBytes) {
      throw Error("lookup cache " + path + ": entry " + std::to_string(e) + " has an invalid size " +
                  std::to_string(n_next) + " at byte " + std::to_string(r.pos() - 4));
    }
    if (entries.count(key)) {
      throw Error("lookup cache " + path + ": entry " + std::to_string(e) + " repeats key " + hex64(key));
    }
    NgramTable::Entry& entry = entries[key];
    entry.next.reserve(n_next);
    for (uint32_t i = 0; i < n_next; ++i) {
      const auto token = static_cast<Token>(r.u32("token"));
      const uint32_t count = r.u32("count");
      if (i > 0 && token <= entry.next.back().token) {
        throw Error("lookup cache " + path + ": token ids of entry " + std::to_string(e) +
                    " are not strictly ascending at token " + std::to_string(token));
      }
      if (token < 0 || token >= n_vocab) {
        throw Error("lookup cache " + path + ": token id " + std::to_string(token) + " outside the vocabulary of " +
                    std::to_string(n_vocab) + " (entry " + std::to_string(e) + ")");
      }
      if (count == 0 || entry.total > UINT32_MAX - count) {
        throw Error("lookup cache " + path + ": invalid count " + std::to_string(count) + " for token " +
                    std::to_string(token) + " (entry " + std::to_string(e) + ")");
      }
      entry.next.push_back(NgramTable::Next{token, count, 0});
      entry.total += count;
    }
  }
  if (r.remaining() != 0) {
    throw Error("lookup cache " + path + ": " + std::to_string(r.remaining()) + " unexpected bytes after the entries");
  }
  if (cache.table_.size() > cache.config_.max_contexts) cache.prune();
  return cache;
}

LookupCache LookupCache::load_or_empty(const std::string& path, int n_vocab, uint64_t vocab_fingerprint,
                                       LookupCacheConfig config, std::string* warning) {
  if (warning) warning->clear();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return LookupCache(n_vocab, vocab_fingerprint, config);
  try {
    return load(path, n_vocab, vocab_fingerprint, config);
  } catch (const Error& e) {
    if (warning) *warning = std::string(e.what()) + "; ignoring it (it will be overwritten at exit)";
    return LookupCache(n_vocab, vocab_fingerprint, config);
  }
}

}  // namespace specdec
