// Random-weight Llama models of realistic shapes, streamed to GGUF (see specdec/make_model.h).
#include "specdec/make_model.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "model/gguf_stream_writer.h"
#include "model/tensor_row_stream.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/rng.h"

namespace specdec {

namespace {

const ModelShape kShapes[] = {
    {"tiny", 256, 2, 4, 2, 768, 512, 512, false},
    {"llama-150m", 576, 30, 9, 3, 1536, 32000, 4096, true},
    {"llama-1b", 2048, 16, 32, 8, 8192, 32000, 4096, false},
    {"llama-8b", 4096, 32, 32, 8, 14336, 32000, 4096, false},
};

constexpr float kWeightStd = 0.02f;
constexpr int kTokenUnknown = 0, kTokenBos = 1, kTokenEos = 2;
constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeByte = 6;

const char* const kWords[] = {
    "the", "and", "to", "of", "a", "was", "in", "he", "she", "it", "that", "his", "her", "with",
    "for", "on", "they", "you", "is", "said", "had", "but", "at", "one", "so", "day", "there",
    "time", "not", "be", "all", "we", "were", "up", "once", "upon", "little", "big", "happy",
    "very", "saw", "play", "went", "friend", "mom", "dog", "cat", "tree", "sun", "ball", "park",
    "what", "when", "from", "this", "have", "like", "out", "can", "will", "would", "about",
    "them", "then", "him", "are", "an", "or", "my", "do", "if", "no", "by", "as", "me", "girl",
    "boy", "named", "loved", "wanted", "home", "good", "new", "water", "look", "come", "help",
};

// The synthetic SentencePiece vocabulary: control tokens, 256 byte tokens, then pieces
// ("▁word", "▁x", letters, digits, punctuation, letter pairs and triples, with and without the
// word-start marker) until n_vocab. Earlier pieces get higher scores (preferred merges).
struct Vocab {
  std::vector<std::string> tokens;  // (n_vocab)
  std::vector<float> scores;        // (n_vocab)
  std::vector<int32_t> types;       // (n_vocab)
};

Vocab synthetic_vocab(int n_vocab) {
  Vocab v;
  auto add = [&](const std::string& piece, float score, int32_t type) {
    v.tokens.push_back(piece);
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, kTypeUnknown);
  add("<s>", 0.0f, kTypeControl);
  add("</s>", 0.0f, kTypeControl);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0.0f, kTypeByte);

  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's word-start marker
  std::vector<std::string> pieces;
  std::set<std::string> seen;
  auto piece = [&](const std::string& p) {
    if (seen.insert(p).second) pieces.push_back(p);
  };
  piece(space);
  for (const char* w : kWords) piece(space + w);
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  for (char c : letters) piece(space + c);
  for (char c : letters) piece(std::string(1, c));
  for (char c : letters) piece(std::string(1, static_cast<char>(c - 'a' + 'A')));
  for (char c : std::string("0123456789.,!?'\"-:;()")) piece(std::string(1, c));
  for (char a : letters)
    for (char b : letters) piece(std::string{a, b});
  for (char a : letters)
    for (char b : letters) piece(space + a + b);
  for (char a : letters)
    for (char b : letters)
      for (char c : letters) {
        piece(std::string{a, b, c});
        piece(space + a + b + c);
      }
  const size_t n_pieces = static_cast<size_t>(n_vocab) - v.tokens.size();
  if (pieces.size() < n_pieces)
    throw Error("make_model: n_vocab " + std::to_string(n_vocab) + " exceeds the synthetic vocabulary");
  for (size_t i = 0; i < n_pieces; ++i) add(pieces[i], -static_cast<float>(i), kTypeNormal);
  return v;
}

// Seed of one row of one tensor: independent of thread count and chunking.
uint64_t weight_row_seed(uint64_t seed, uint64_t tensor_index, int64_t row) {
  return seed * 0x9E3779B97F4A7C15ull ^ (tensor_index << 40) ^ static_cast<uint64_t>(row);
}

// Standard normal quantiles at (i + 0.5) / 65536 (inverse CDF by bisection on erfc): sampling
// a uniform 16-bit index gives an N(0, 1) variate to ~4 digits, at a table lookup per value.
const std::vector<float>& normal_quantiles() {
  static const std::vector<float> table = [] {
    constexpr int kSize = 1 << 16;
    std::vector<float> q(kSize);  // (65536) increasing
    for (int i = 0; i < kSize; ++i) {
      const double p = (i + 0.5) / kSize;
      double lo = -10.0, hi = 10.0;
      for (int it = 0; it < 60; ++it) {  // CDF(x) = erfc(-x / sqrt 2) / 2
        const double mid = 0.5 * (lo + hi);
        if (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p) lo = mid; else hi = mid;
      }
      q[static_cast<size_t>(i)] = static_cast<float>(0.5 * (lo + hi));
    }
    return q;
  }();
  return table;
}

// n values ~ N(0, std): four 16-bit quantile indices per 64 random bits.
void gaussian_row(Rng& rng, float std, float* out, int64_t n) {
  const float* quantiles = normal_quantiles().data();
  for (int64_t i = 0; i < n; i += 4) {
    const uint64_t bits = rng.next_u64();
    for (int64_t j = 0; j < 4 && i + j < n; ++j)
      out[i + j] = quantiles[(bits >> (16 * j)) & 0xFFFF] * std;
  }
}

void check_shape(const ModelShape& s) {
  auto bad = [&](const std::string& what) {
    throw Error("model shape '" + s.name + "': " + what);
  };
  if (s.n_embd < 1 || s.n_layers < 1 || s.n_heads < 1 || s.n_kv_heads < 1 || s.n_ff < 1 || s.n_ctx < 1)
    bad("every size must be >= 1");
  if (s.n_embd % s.n_heads != 0) bad("n_embd " + std::to_string(s.n_embd) + " not divisible by n_heads");
  if (s.n_heads % s.n_kv_heads != 0) bad("n_heads not divisible by n_kv_heads");
  if ((s.n_embd / s.n_heads) % 2 != 0) bad("odd head dimension");
  if (s.n_vocab < 300) bad("n_vocab " + std::to_string(s.n_vocab) + " < 300");
}

}  // namespace

ModelShape model_shape(const std::string& name) {
  for (const auto& s : kShapes)
    if (s.name == name) return s;
  std::string valid;
  for (const auto& n : model_shape_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error("unknown model shape '" + name + "' (valid: " + valid + ")");
}

std::vector<std::string> model_shape_names() {
  std::vector<std::string> names;
  for (const auto& s : kShapes) names.push_back(s.name);
  return names;
}

MakeModelStats make_model(const ModelShape& shape, const QuantPreset& preset, uint64_t seed,
                          const std::string& out_path, ThreadPool* pool,
                          const ModelFileProgress& progress) {
  check_shape(shape);
  const int head_dim = shape.n_embd / shape.n_heads;
  const int64_t kv_dim = static_cast<int64_t>(head_dim) * shape.n_kv_heads;

  GgufWriter meta;
  meta.set_string("general.architecture", "llama");
  meta.set_string("general.name", "specdec random " + shape.name);
  meta.set_u32("general.file_type", preset.file_type);
  meta.set_u32("general.quantization_version", 2);
  meta.set_u32("llama.context_length", static_cast<uint32_t>(shape.n_ctx));
  meta.set_u32("llama.embedding_length", static_cast<uint32_t>(shape.n_embd));
  meta.set_u32("llama.block_count", static_cast<uint32_t>(shape.n_layers));
  meta.set_u32("llama.feed_forward_length", static_cast<uint32_t>(shape.n_ff));
  meta.set_u32("llama.attention.head_count", static_cast<uint32_t>(shape.n_heads));
  meta.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(shape.n_kv_heads));
  meta.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  meta.set_f32("llama.rope.freq_base", 10000.0f);
  meta.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  meta.set_u32("llama.vocab_size", static_cast<uint32_t>(shape.n_vocab));
  const Vocab vocab = synthetic_vocab(shape.n_vocab);
  meta.set_string("tokenizer.ggml.model", "llama");
  meta.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  meta.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  meta.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  meta.set_u32("tokenizer.ggml.bos_token_id", kTokenBos);
  meta.set_u32("tokenizer.ggml.eos_token_id", kTokenEos);
  meta.set_u32("tokenizer.ggml.unknown_token_id", kTokenUnknown);
  meta.set_bool("tokenizer.ggml.add_bos_token", true);
  meta.set_bool("tokenizer.ggml.add_eos_token", false);

  // Tensors in llama.cpp's order; norms (1-D) are F32 ones, everything else N(0, 0.02).
  struct Plan { std::string name; std::vector<int64_t> dims; bool is_norm; };
  std::vector<Plan> plans;
  const int64_t d = shape.n_embd;
  plans.push_back({"token_embd.weight", {d, shape.n_vocab}, false});
  plans.push_back({"output_norm.weight", {d}, true});
  if (!shape.tied_output) plans.push_back({"output.weight", {d, shape.n_vocab}, false});
  for (int l = 0; l < shape.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    plans.push_back({p + "attn_norm.weight", {d}, true});
    plans.push_back({p + "attn_q.weight", {d, d}, false});
    plans.push_back({p + "attn_k.weight", {d, kv_dim}, false});
    plans.push_back({p + "attn_v.weight", {d, kv_dim}, false});
    plans.push_back({p + "attn_output.weight", {d, d}, false});
    plans.push_back({p + "ffn_norm.weight", {d}, true});
    plans.push_back({p + "ffn_gate.weight", {d, shape.n_ff}, false});
    plans.push_back({p + "ffn_up.weight", {d, shape.n_ff}, false});
    plans.push_back({p + "ffn_down.weight", {static_cast<int64_t>(shape.n_ff), d}, false});
  }
  const TensorTypeContext context{shape.n_layers, shape.n_heads / shape.n_kv_heads,
                                  !shape.tied_output};
  std::vector<model_files::StreamTensor> tensors;
  MakeModelStats stats;
  for (const auto& p : plans) {
    const DType type = p.is_norm ? DType::F32 : preset_tensor_type(preset, p.name, p.dims, context);
    tensors.push_back({p.name, type, p.dims});
    stats.types.emplace_back(p.name, type);
  }

  (void)normal_quantiles();  // build the table before the threads start
  model_files::GgufStreamWriter writer(out_path, meta, tensors);
  for (size_t t = 0; t < plans.size(); ++t) {
    const Plan& p = plans[t];
    const int64_t n_per_row = p.dims[0];
    const int64_t n_rows = p.dims.size() > 1 ? p.dims[1] : 1;
    const bool is_norm = p.is_norm;
    model_files::RowSource source = [&, t, is_norm, n_per_row](int64_t row, float* out) {
      if (is_norm) {
        for (int64_t i = 0; i < n_per_row; ++i) out[i] = 1.0f;
        return;
      }
      Rng rng(weight_row_seed(seed, t, row));
      gaussian_row(rng, kWeightStd, out, n_per_row);
    };
    model_files::stream_tensor_rows(writer, tensors[t].type, n_per_row, n_rows, source, pool);
    stats.n_params += static_cast<uint64_t>(n_per_row * n_rows);
    stats.n_bytes += writer.tensor_bytes(t);
    if (progress) progress(t + 1, plans.size(), p.name);
  }
  writer.finish();
  return stats;
}

}  // namespace specdec
