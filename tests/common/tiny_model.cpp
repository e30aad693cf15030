#include "common/tiny_model.h"

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"

namespace specdec::testing {
namespace {

// Uniform in [-1, 1).

// A minimal SentencePiece vocabulary of exactly n_vocab entries.
struct Vocab {
  std::vector<std::string> tokens;  // (n_vocab)
  std::vector<float> scores;        // (n_vocab)
  std::vector<int32_t> types;       // (n_vocab) llama.cpp token types: 1 normal, 2 unk, 3 control, 6 byte
};

Vocab make_vocab(int n_vocab) {
  Vocab v;
  std::set<std::string> seen;
  auto add = [&](const std::string& text, int32_t type) {
    if (static_cast<int>(v.tokens.size()) >= n_vocab || !seen.insert(text).second) return;
    v.tokens.push_back(text);
    v.scores.push_back(type == 1 ? -static_cast<float>(v.tokens.size()) : 0.0f);
    v.types.push_back(type);
  };
  add("<unk>", 2);
  add("<s>", 3);
  add("</s>", 3);
  if (n_vocab >= 259) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, 6);
    }
  }
  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  add(space, 1);
  for (char c = 'a'; c <= 'z'; ++c) add(std::string(1, c), 1);
  for (const char* p = ".,!?'\"-:;()0123456789"; *p; ++p) add(std::string(1, *p), 1);
  for (char c = 'A'; c <= 'Z'; ++c) add(std::string(1, c), 1);
  for (char c = 'a'; c <= 'z'; ++c) add(space + c, 1);
  for (char c = 'A'; c <= 'Z'; ++c) add(space + c, 1);
  for (const char* w : {"th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
                        "or", "te", "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng"}) {
    add(w, 1);
    add(space + w, 1);
  }
  for (const char* w : {"the", "and", "was", "she", "her", "his", "had", "one", "day", "upon",
                        "time", "Once", "there", "little", "girl", "play", "happy"}) {
    add(space + w, 1);
  }
  // Fill the rest with deterministic two-letter pieces.
  for (int i = 0; static_cast<int>(v.tokens.size()) < n_vocab; ++i) {
    std::string piece;
    for (int x = i; ; x = x / 26 - 1) {
      piece.insert(piece.begin(), static_cast<char>('a' + x % 26));
      if (x < 26) break;
    }
    add(space + piece, 1);
  }
  return v;
}

void check_spec(const TinyModelSpec& s) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error("TinyModelSpec: invalid " + what);
  };
  need(s.n_vocab >= 8, "n_vocab " + std::to_string(s.n_vocab) + " (need >= 8)");
  need(s.n_embd > 0 && s.n_layers > 0 && s.n_heads > 0 && s.n_kv_heads > 0 && s.n_ff > 0 && s.n_ctx > 0,
       "dimension (all must be positive)");
  need(s.n_embd % s.n_heads == 0, "n_embd " + std::to_string(s.n_embd) + " not a multiple of n_heads");
  need(s.n_heads % s.n_kv_heads == 0, "n_kv_heads " + std::to_string(s.n_kv_heads) + " does not divide n_heads");
  need((s.n_embd / s.n_heads) % 2 == 0, "head_dim (must be even)");
  need(s.arch == "llama" || s.arch == "qwen2", "arch '" + s.arch + "' (llama or qwen2)");
  int block = dtype_info(s.weight_type).block_size;
  need(s.n_embd % block == 0 && s.n_ff % block == 0,
       "n_embd/n_ff for weight type " + std::string(dtype_name(s.weight_type)) + " (block size " +
           std::to_string(block) + ")");
}

// Adds a (n_out, n_in) matrix (GGUF dims {n_in, n_out}) of random values times `scale`, stored as `type`.
void add_matrix(GgufWriter& w, const std::string& name, DType type, int64_t n_in, int64_t n_out,
                float scale, Rng& rng) {
  std::vector<float> values(static_cast<size_t>(n_in * n_out));  // (n_out, n_in)
  for (float& x : values) x = uniform_signed(rng) * scale;
  if (type == DType::F32) {
    w.add_tensor_f32(name, {n_in, n_out}, values.data());
    return;
  }
  size_t row_bytes = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(n_out));  // (n_out, row_bytes)
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(type, values.data() + r * n_in, bytes.data() + r * row_bytes, n_in);
  }
  w.add_tensor(name, type, {n_in, n_out}, std::move(bytes));
}

void add_vector(GgufWriter& w, const std::string& name, int64_t n, float center, float spread, Rng& rng) {
  std::vector<float> values(static_cast<size_t>(n));  // (n)
  for (float& x : values) x = center + spread * uniform_signed(rng);
  w.add_tensor_f32(name, {n}, values.data());
}

}  // namespace

void write_random_llama(const std::string& path, const TinyModelSpec& spec) {
  check_spec(spec);
  const bool qwen2 = spec.arch == "qwen2";
  const bool tied = spec.tied_output < 0 ? qwen2 : spec.tied_output != 0;
  const int head_dim = spec.n_embd / spec.n_heads;
  const int kv_dim = spec.n_kv_heads * head_dim;
  const std::string& a = spec.arch;

  GgufWriter w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "tiny-random-" + a);
  w.set_u32(a + ".context_length", static_cast<uint32_t>(spec.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(spec.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(spec.n_layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(spec.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(spec.n_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(spec.n_kv_heads));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", qwen2 ? 1e-6f : 1e-5f);
  w.set_f32(a + ".rope.freq_base", spec.freq_base);

  Vocab vocab = make_vocab(spec.n_vocab);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);

  Rng rng(spec.seed);
  const float s = spec.weight_scale;
  // Uniform in [-1, 1) has variance 1/3: scale by sqrt(3 / n_in) for unit-variance outputs.
  auto fan_in = [](int n_in) { return std::sqrt(3.0f / static_cast<float>(n_in)); };
  add_matrix(w, "token_embd.weight", spec.weight_type, spec.n_embd, spec.n_vocab, s, rng);
  add_vector(w, "output_norm.weight", spec.n_embd, 1.0f, 0.2f, rng);
  if (!tied) {
    add_matrix(w, "output.weight", spec.weight_type, spec.n_embd, spec.n_vocab, s * fan_in(spec.n_embd) * 2.0f, rng);
  }
  if (spec.rope_freqs) {
    std::vector<float> factors(static_cast<size_t>(head_dim / 2));  // (n_rot / 2)
    for (size_t i = 0; i < factors.size(); ++i) {
      factors[i] = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(factors.size());
    }
    w.add_tensor_f32("rope_freqs.weight", {static_cast<int64_t>(factors.size())}, factors.data());
  }
  for (int l = 0; l < spec.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add_vector(w, p + "attn_norm.weight", spec.n_embd, 1.0f, 0.2f, rng);
    add_matrix(w, p + "attn_q.weight", spec.weight_type, spec.n_embd, spec.n_embd, s * fan_in(spec.n_embd), rng);
    add_matrix(w, p + "attn_k.weight", spec.weight_type, spec.n_embd, kv_dim, s * fan_in(spec.n_embd), rng);
    add_matrix(w, p + "attn_v.weight", spec.weight_type, spec.n_embd, kv_dim, s * fan_in(spec.n_embd), rng);
    if (qwen2) {
      add_vector(w, p + "attn_q.bias", spec.n_embd, 0.0f, 0.5f, rng);
      add_vector(w, p + "attn_k.bias", kv_dim, 0.0f, 0.5f, rng);
      add_vector(w, p + "attn_v.bias", kv_dim, 0.0f, 0.5f, rng);
    }
    add_matrix(w, p + "attn_output.weight", spec.weight_type, spec.n_embd, spec.n_embd, s * fan_in(spec.n_embd), rng);
    add_vector(w, p + "ffn_norm.weight", spec.n_embd, 1.0f, 0.2f, rng);
    add_matrix(w, p + "ffn_gate.weight", spec.weight_type, spec.n_embd, spec.n_ff, s * fan_in(spec.n_embd), rng);
    add_matrix(w, p + "ffn_up.weight", spec.weight_type, spec.n_embd, spec.n_ff, s * fan_in(spec.n_embd), rng);
    add_matrix(w, p + "ffn_down.weight", spec.weight_type, spec.n_ff, spec.n_embd, s * fan_in(spec.n_ff), rng);
  }
  w.write(path);
}

std::string make_random_llama(const std::string& name, const TinyModelSpec& spec) {
  std::string path = temp_dir() + "/" + name;
  write_random_llama(path, spec);
  return path;
}

namespace {
void copy_metadata(const GgufFile& src, GgufWriter& w) {
  for (const auto& [key, value] : src.metadata()) {
    if (key != "general.alignment") w.set(key, value);
  }
  w.set_alignment(src.alignment());
}
}  // namespace

void write_edited_copy(const std::string& src_gguf, const std::string& dst,
                       const std::function<void(GgufWriter&)>& edit) {
  auto src = GgufFile::open(src_gguf);
  GgufWriter w;
  copy_metadata(*src, w);
  edit(w);
  for (const GgufTensorInfo& t : src->tensors()) {
    w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  w.write(dst);
}

}  // namespace specdec::testing
