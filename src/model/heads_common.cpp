// model/heads_common.cpp — the target fingerprint and header checks of head files (docs/HEADS.md).
#include "model/heads_common.h"

#include <cstdint>
#include <cstdio>

#include "specdec/error.h"
#include "specdec/heads.h"

namespace specdec {

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

void fnv1a(uint64_t& hash, const char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    hash ^= static_cast<uint8_t>(bytes[i]);
    hash *= kFnvPrime;
  }
}

}  // namespace

std::string target_fingerprint(const std::vector<std::string>& tokens, const ModelConfig& c) {
  uint64_t hash = kFnvOffset;
  const char zero = 0;
  for (const std::string& token : tokens) {
    fnv1a(hash, token.data(), token.size());
    fnv1a(hash, &zero, 1);
  }
  const std::string shapes = "n_vocab=" + std::to_string(c.n_vocab) + ",n_embd=" + std::to_string(c.n_embd) +
                             ",n_layers=" + std::to_string(c.n_layers) + ",n_heads=" + std::to_string(c.n_heads) +
                             ",n_kv_heads=" + std::to_string(c.n_kv_heads) + ",n_ff=" + std::to_string(c.n_ff);
  fnv1a(hash, shapes.data(), shapes.size());
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

std::string target_fingerprint(const Transformer& target) {
  const GgufFile& gguf = target.gguf();
  if (!gguf.has("tokenizer.ggml.tokens")) {
    throw Error(gguf.path() + ": no tokenizer.ggml.tokens, so the target has no fingerprint for head files");
  }
  return target_fingerprint(gguf.get_string_array("tokenizer.ggml.tokens"), target.config());
}

void check_heads_header(const GgufFile& heads, const std::string& arch, const Transformer& target) {
  const std::string found_arch = heads.get_string("general.architecture");
  if (found_arch != arch) {
    throw Error(heads.path() + ": general.architecture is '" + found_arch + "', expected '" + arch + "'");
  }
  const std::string wanted = heads.get_string("specdec.target.fingerprint");
  const std::string actual = target_fingerprint(target);
  if (wanted != actual) {
    throw Error(heads.path() + " was trained for the target with fingerprint " + wanted + ", but " +
                target.gguf().path() + " has fingerprint " + actual + " (another tokenizer or shape)");
  }
  const int n_embd = heads_int(heads, arch + ".embedding_length", 1);
  if (n_embd != target.config().n_embd) {
    throw Error(heads.path() + ": " + arch + ".embedding_length " + std::to_string(n_embd) + " but the target " +
                target.gguf().path() + " has n_embd " + std::to_string(target.config().n_embd));
  }
}

int heads_int(const GgufFile& heads, const std::string& key, int min_value) {
  const uint64_t value = heads.get_u64(key);
  if (value < static_cast<uint64_t>(min_value) || value > (1u << 20)) {
    throw Error(heads.path() + ": " + key + " = " + std::to_string(value) + " outside [" + std::to_string(min_value) +
                ", " + std::to_string(1u << 20) + "]");
  }
  return static_cast<int>(value);
}

void check_no_unknown_tensors(const GgufFile& heads, const std::set<std::string>& expected) {
  for (const GgufTensorInfo& t : heads.tensors()) {
    if (expected.count(t.name) == 0) throw Error(heads.path() + ": unexpected tensor '" + t.name + "'");
  }
}

}  // namespace specdec
