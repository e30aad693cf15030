// model/config.cpp — ModelConfig from a GGUF's `<arch>.*` metadata.
//
// Required (Error naming key and file when absent): general.architecture,
// <arch>.embedding_length, .block_count, .attention.head_count, .feed_forward_length,
// .context_length, .attention.layer_norm_rms_epsilon, and tokenizer.ggml.tokens (n_vocab).
// Optional, with llama.cpp's defaults: .attention.head_count_kv (= head_count),
// .attention.key_length / value_length (= n_embd / n_heads), .rope.dimension_count (= head_dim),
// .rope.freq_base (10000), .rope.scaling.type (none; "linear" -> freq_scale = 1 / factor),
// .rope.scale_linear (older linear factor), .vocab_size (= number of tokens).
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/model.h"

namespace specdec {

namespace {

constexpr int kMaxDimension = 1 << 24;  // sanity bound for hyperparameters

int read_dimension(const GgufFile& gguf, const std::string& key, std::optional<int> fallback = std::nullopt) {
  if (fallback && !gguf.has(key)) return *fallback;
  if (!gguf.has(key)) {
    throw Error(gguf.path() + ": missing required metadata key '" + key + "'");
  }
  const uint64_t value = gguf.get_u64(key);
  if (value == 0 || value > static_cast<uint64_t>(kMaxDimension)) {
    throw Error(gguf.path() + ": metadata '" + key + "' = " + std::to_string(value) +
                " is out of range (1.." + std::to_string(kMaxDimension) + ")");
  }
  return static_cast<int>(value);
}

float read_float(const GgufFile& gguf, const std::string& key) {
  if (!gguf.has(key)) throw Error(gguf.path() + ": missing required metadata key '" + key + "'");
  return gguf.get_f32(key);
}

int read_vocab_size(const GgufFile& gguf, const std::string& arch) {
  const std::string vocab_key = arch + ".vocab_size";
  if (gguf.has(vocab_key)) return read_dimension(gguf, vocab_key);
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  if (tokens == nullptr) {
    throw Error(gguf.path() + ": missing required metadata key 'tokenizer.ggml.tokens' (the token list)");
  }
  const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&tokens->value);
  if (tokens->type != GgufValueType::ARRAY || array == nullptr || !*array) {
    throw Error(gguf.path() + ": metadata 'tokenizer.ggml.tokens' is a " +
                gguf_value_type_name(tokens->type) + ", expected an array of strings");
  }
  const size_t n = (*array)->size();
  if (n == 0 || n > static_cast<size_t>(kMaxDimension)) {
    throw Error(gguf.path() + ": 'tokenizer.ggml.tokens' has " + std::to_string(n) + " entries");
  }
  return static_cast<int>(n);
}

void read_rope_scaling(const GgufFile& gguf, const std::string& arch, RopeParams& rope) {
  const std::string type = gguf.get_string_or(arch + ".rope.scaling.type", "none");
  if (type == "none") {
    // Older files: <arch>.rope.scale_linear holds the linear factor.
    const float factor = gguf.get_f32_or(arch + ".rope.scale_linear", 1.0f);
    if (!(factor > 0.0f)) {
      throw Error(gguf.path() + ": '" + arch + ".rope.scale_linear' = " + std::to_string(factor) + " must be > 0");
    }
    rope.freq_scale = 1.0f / factor;
  } else if (type == "linear") {
    const float factor = gguf.get_f32_or(arch + ".rope.scaling.factor", 1.0f);
    if (!(factor >= 0.0f)) {
      throw Error(gguf.path() + ": '" + arch + ".rope.scaling.factor' = " + std::to_string(factor) + " must be >= 0");
    }
    rope.freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  } else {
    throw Error(gguf.path() + ": rope scaling type '" + type + "' (" + arch +
                ".rope.scaling.type) is not supported; supported: none, linear");
  }
}

}  // namespace

const char* supported_architectures() { return "llama, qwen2"; }

ModelConfig read_model_config(const GgufFile& gguf) {
  ModelConfig c;
  if (!gguf.has("general.architecture")) {
    throw Error(gguf.path() + ": missing required metadata key 'general.architecture'");
  }
  c.arch = gguf.get_string("general.architecture");
  if (c.arch != "llama" && c.arch != "qwen2") {
    throw Error(gguf.path() + ": unsupported architecture '" + c.arch + "' (supported: " +
                supported_architectures() + ")");
  }
  const std::string& a = c.arch;
  c.name = gguf.get_string_or("general.name", "");
  c.n_embd = read_dimension(gguf, a + ".embedding_length");
  c.n_layers = read_dimension(gguf, a + ".block_count");
  c.n_heads = read_dimension(gguf, a + ".attention.head_count");
  c.n_kv_heads = read_dimension(gguf, a + ".attention.head_count_kv", c.n_heads);
  c.n_ff = read_dimension(gguf, a + ".feed_forward_length");
  c.n_ctx_train = read_dimension(gguf, a + ".context_length");
  c.rms_eps = read_float(gguf, a + ".attention.layer_norm_rms_epsilon");
  c.n_vocab = read_vocab_size(gguf, a);

  if (c.n_heads % c.n_kv_heads != 0) {
    throw Error(gguf.path() + ": head_count " + std::to_string(c.n_heads) +
                " is not a multiple of head_count_kv " + std::to_string(c.n_kv_heads));
  }
  const int default_head_dim = c.n_embd % c.n_heads == 0 ? c.n_embd / c.n_heads : 0;
  c.head_dim = read_dimension(gguf, a + ".attention.key_length", default_head_dim);
  const int value_dim = read_dimension(gguf, a + ".attention.value_length", c.head_dim);
  if (c.head_dim == 0) {
    throw Error(gguf.path() + ": embedding_length " + std::to_string(c.n_embd) +
                " is not a multiple of head_count " + std::to_string(c.n_heads) +
                " and no attention.key_length is given");
  }
  if (value_dim != c.head_dim) {
    throw Error(gguf.path() + ": attention.value_length " + std::to_string(value_dim) +
                " differs from key_length " + std::to_string(c.head_dim) + " (not supported)");
  }
  if (!(c.rms_eps > 0.0f) || !std::isfinite(c.rms_eps)) {
    throw Error(gguf.path() + ": " + a + ".attention.layer_norm_rms_epsilon = " +
                std::to_string(c.rms_eps) + " must be a positive number");
  }

  c.rope.n_rot = read_dimension(gguf, a + ".rope.dimension_count", c.head_dim);
  if (c.rope.n_rot > c.head_dim || c.rope.n_rot % 2 != 0) {
    throw Error(gguf.path() + ": " + a + ".rope.dimension_count = " + std::to_string(c.rope.n_rot) +
                " must be even and <= head_dim " + std::to_string(c.head_dim));
  }
  c.rope.freq_base = gguf.get_f32_or(a + ".rope.freq_base", 10000.0f);
  if (!(c.rope.freq_base > 0.0f) || !std::isfinite(c.rope.freq_base)) {
    throw Error(gguf.path() + ": " + a + ".rope.freq_base = " + std::to_string(c.rope.freq_base) +
                " must be a positive number");
  }
  read_rope_scaling(gguf, a, c.rope);
  c.rope.layout = a == "qwen2" ? RopeLayout::Neox : RopeLayout::Norm;
  c.rope.freq_factors = nullptr;
  c.qkv_bias = a == "qwen2";
  c.tied_output = gguf.find_tensor("output.weight") == nullptr;
  return c;
}

}  // namespace specdec
