// model/llama2c_import.cpp — llama2.c legacy checkpoint + tokenizer.bin -> GGUF.
//
// The GGUF written matches what llama.cpp's convert-llama2c-to-ggml produces (checked byte for
// byte against the shared stories260K.gguf in tests/gguf/llama2c_import_test.cpp): metadata in
// the same order with the same values, tensors in the same order. llama2.c stores each weight
// matrix row-major as (n_out, n_in), which is exactly GGUF's [n_in, n_out] layout, and uses the
// same (interleaved pairs) RoPE convention, so weights are copied unchanged.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "specdec/convert.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/mmap_file.h"

namespace specdec {
namespace {

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);
constexpr int32_t kVersionedMagic = 0x616b3432;  // "ak42": llama2.c's newer export formats

// Token types as GGUF stores them (llama.cpp's llama_token_type).
constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeByte = 6;
constexpr uint32_t kUnknownId = 0, kBosId = 1, kEosId = 2;
constexpr uint32_t kNoToken = 0xFFFFFFFFu;  // llama.cpp writes LLAMA_TOKEN_NULL (-1) as U32
constexpr uint32_t kDefaultContext = 128;   // llama.cpp's converter default

// Floats the checkpoint holds after the header (freq_cis and wcls included).
uint64_t expected_floats(const Llama2cConfig& c) {
  const uint64_t dim = static_cast<uint64_t>(c.dim), hidden = static_cast<uint64_t>(c.hidden_dim);
  const uint64_t layers = static_cast<uint64_t>(c.n_layers);
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  const uint64_t kv_dim = dim / static_cast<uint64_t>(c.n_heads) * static_cast<uint64_t>(c.n_kv_heads);
  const uint64_t head_size = dim / static_cast<uint64_t>(c.n_heads);
  uint64_t n = vocab * dim;                          // token_embedding
  n += layers * dim;                                 // rms_att
  n += layers * dim * dim * 2;                       // wq, wo
  n += layers * kv_dim * dim * 2;                    // wk, wv
  n += layers * dim;                                 // rms_ffn
  n += layers * hidden * dim * 3;                    // w1, w2, w3
  n += dim;                                          // rms_final
  n += static_cast<uint64_t>(c.seq_len) * head_size;  // freq_cis_real + freq_cis_imag
  if (!c.shared_classifier) n += vocab * dim;        // wcls
  return n;
}

// The checkpoint image [data, data + size); `path` names it in messages.
struct Image {
  const uint8_t* bytes;
  size_t n_bytes;
  std::string path;
  const uint8_t* data() const { return bytes; }
  size_t size() const { return n_bytes; }
};

Image image_of(const MappedFile& file) { return {file.data(), file.size(), file.path()}; }

Llama2cConfig parse_header(const Image& file) {
  const std::string& path = file.path;
  const std::string where = "llama2.c checkpoint '" + path + "'";
  if (file.size() < kHeaderBytes)
    throw Error(where + " is truncated: " + std::to_string(file.size()) +
                " bytes, the header alone needs " + std::to_string(kHeaderBytes));
  int32_t h[7];
  std::memcpy(h, file.data(), kHeaderBytes);
  if (h[0] == kVersionedMagic)
    throw Error(where + " is a versioned llama2.c export (magic \"ak42\", version " +
                std::to_string(h[1]) + "); only the legacy format (export.py --version 0 / "
                "legacy_export) is supported");
  Llama2cConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] == std::numeric_limits<int32_t>::min() ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.seq_len = h[6];

  auto check = [&](const char* field, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi)
      throw Error(where + " has an absurd header: " + field + " = " + std::to_string(value) +
                  " (expected " + std::to_string(lo) + ".." + std::to_string(hi) +
                  "; is this a legacy llama2.c checkpoint?)");
  };
  check("dim", c.dim, 1, 1 << 16);
  check("hidden_dim", c.hidden_dim, 1, 1 << 20);
  check("n_layers", c.n_layers, 1, 1 << 10);
  check("n_heads", c.n_heads, 1, c.dim);
  check("n_kv_heads", c.n_kv_heads, 1, c.n_heads);
  check("vocab_size", c.vocab_size, 3, 1 << 22);  // <unk>, <s>, </s> at least
  check("seq_len", c.seq_len, 1, 1 << 24);
  if (c.dim % c.n_heads != 0)
    throw Error(where + ": dim " + std::to_string(c.dim) + " is not a multiple of n_heads " +
                std::to_string(c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(where + ": n_heads " + std::to_string(c.n_heads) +
                " is not a multiple of n_kv_heads " + std::to_string(c.n_kv_heads));
  if ((c.dim / c.n_heads) % 2 != 0)
    throw Error(where + ": head size " + std::to_string(c.dim / c.n_heads) +
                " is odd; RoPE needs an even head size");

  const uint64_t expected = kHeaderBytes + expected_floats(c) * sizeof(float);
  const std::string shape = " (dim " + std::to_string(c.dim) + ", hidden_dim " +
                            std::to_string(c.hidden_dim) + ", " + std::to_string(c.n_layers) +
                            " layers, " + std::to_string(c.n_heads) + "/" +
                            std::to_string(c.n_kv_heads) + " heads, vocab " +
                            std::to_string(c.vocab_size) +
                            (c.shared_classifier ? ", shared" : ", separate") +
                            " classifier, seq_len " + std::to_string(c.seq_len) + ")";
  if (file.size() < expected)
    throw Error(where + " is truncated: its header" + shape + " implies " +
                std::to_string(expected) + " bytes, the file has " + std::to_string(file.size()));
  if (file.size() > expected)
    throw Error(where + " has " + std::to_string(file.size()) + " bytes, more than the " +
                std::to_string(expected) + " its header" + shape +
                " implies (not a legacy llama2.c checkpoint, or a wrong vocab_size sign?)");
  return c;
}

using Vocab = Llama2cVocab;

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// "<0xAB>": a byte-fallback token.
bool is_byte_token(const std::string& text) {
  return text.size() == 6 && text.compare(0, 3, "<0x") == 0 && is_hex(text[3]) &&
         is_hex(text[4]) && text[5] == '>';
}

std::string escape_spaces(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ') out += "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space
    else out += c;
  }
  return out;
}

Vocab read_tokenizer(const Image& file, int32_t n_vocab) {
  const std::string& path = file.path;
  const std::string where = "llama2.c tokenizer '" + path + "'";
  const uint8_t* p = file.data();
  size_t pos = 0;
  auto need = [&](size_t n, const std::string& what) {
    if (n > file.size() - pos)
      throw Error(where + " is truncated while reading " + what + " at offset " +
                  std::to_string(pos) + " (file has " + std::to_string(file.size()) +
                  " bytes; the model's vocab_size is " + std::to_string(n_vocab) + ")");
  };
  auto read_i32 = [&](const std::string& what) {
    need(4, what);
    int32_t v;
    std::memcpy(&v, p + pos, 4);
    pos += 4;
    return v;
  };
  const int32_t max_token_length = read_i32("max_token_length");
  if (max_token_length < 0)
    throw Error(where + ": max_token_length " + std::to_string(max_token_length) + " is negative");

  Vocab v;
  v.tokens.reserve(static_cast<size_t>(n_vocab));
  v.scores.reserve(static_cast<size_t>(n_vocab));
  v.types.reserve(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    const std::string what = "token " + std::to_string(id);
    need(4, "the score of " + what);
    float score;
    std::memcpy(&score, p + pos, 4);
    pos += 4;
    const int32_t len = read_i32("the length of " + what);
    if (len < 0 || static_cast<size_t>(len) > file.size() - pos)
      throw Error(where + ": " + what + " has length " + std::to_string(len) + " at offset " +
                  std::to_string(pos - 4) + ", but only " + std::to_string(file.size() - pos) +
                  " bytes are left");
    std::string text(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);

    int32_t type = kTypeNormal;
    if (static_cast<uint32_t>(id) == kUnknownId) {
      text = "<unk>";
      type = kTypeUnknown;
    } else if (static_cast<uint32_t>(id) == kBosId) {
      text = "<s>";  // llama2.c stores "\n<s>\n"
      type = kTypeControl;
    } else if (static_cast<uint32_t>(id) == kEosId) {
      text = "</s>";
      type = kTypeControl;
    } else if (text.empty()) {
      type = kTypeControl;
    } else if (is_byte_token(text)) {
      type = kTypeByte;
    }
    v.tokens.push_back(escape_spaces(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  if (pos != file.size())
    throw Error(where + " has " + std::to_string(file.size() - pos) +
                " bytes after its " + std::to_string(n_vocab) +
                " tokens: it does not match the model (vocab_size " + std::to_string(n_vocab) + ")");
  return v;
}

// Builds the GGUF for a validated checkpoint image and its tokenizer image.
GgufWriter build_gguf(const Image& file, const Llama2cConfig& c, const Image& tokenizer,
                      const Llama2cConvertOptions& options) {
  const std::string& model_bin = file.path;
  const auto seq_len = static_cast<uint32_t>(c.seq_len);
  const uint32_t n_ctx = !options.context_length      ? std::min(kDefaultContext, seq_len)
                         : *options.context_length == 0 ? seq_len
                                                        : *options.context_length;
  if (n_ctx > static_cast<uint32_t>(c.seq_len))
    throw Error("context length " + std::to_string(n_ctx) + " exceeds the seq_len " +
                std::to_string(c.seq_len) + " that '" + model_bin + "' was trained with");
  const Vocab vocab = read_tokenizer(tokenizer, c.vocab_size);

  const int64_t dim = c.dim, hidden = c.hidden_dim, n_vocab = c.vocab_size;
  const int64_t kv_dim = dim / c.n_heads * c.n_kv_heads;
  const int64_t head_size = dim / c.n_heads;

  // Walks the fp32 arrays in file order; sizes were validated against the file by parse_header.
  const uint8_t* cursor = file.data() + kHeaderBytes;
  auto take = [&](int64_t n_floats) {
    const uint8_t* at = cursor;
    cursor += static_cast<size_t>(n_floats) * sizeof(float);
    return at;
  };
  auto bytes_of = [](const uint8_t* at, int64_t n_floats) {
    return std::vector<uint8_t>(at, at + static_cast<size_t>(n_floats) * sizeof(float));
  };
  const int64_t L = c.n_layers;
  const uint8_t* token_embedding = take(n_vocab * dim);  // (vocab, dim)
  const uint8_t* rms_att = take(L * dim);                // (layers, dim)
  const uint8_t* wq = take(L * dim * dim);               // (layers, dim, dim)
  const uint8_t* wk = take(L * kv_dim * dim);            // (layers, kv_dim, dim)
  const uint8_t* wv = take(L * kv_dim * dim);            // (layers, kv_dim, dim)
  const uint8_t* wo = take(L * dim * dim);               // (layers, dim, dim)
  const uint8_t* rms_ffn = take(L * dim);                // (layers, dim)
  const uint8_t* w1 = take(L * hidden * dim);            // (layers, hidden, dim)
  const uint8_t* w2 = take(L * dim * hidden);            // (layers, dim, hidden)
  const uint8_t* w3 = take(L * hidden * dim);            // (layers, hidden, dim)
  const uint8_t* rms_final = take(dim);                  // (dim)
  take(int64_t{c.seq_len} * head_size);                  // freq_cis_real, freq_cis_imag: unused
  const uint8_t* wcls = c.shared_classifier ? token_embedding : take(n_vocab * dim);

  GgufWriter w;
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "llama");
  w.set_u32("tokenizer.ggml.unknown_token_id", kUnknownId);
  w.set_u32("tokenizer.ggml.bos_token_id", kBosId);
  w.set_u32("tokenizer.ggml.eos_token_id", kEosId);
  w.set_u32("tokenizer.ggml.seperator_token_id", kNoToken);  // sic: llama.cpp's key spelling
  w.set_u32("tokenizer.ggml.padding_token_id", kNoToken);
  w.set_u32("llama.context_length", n_ctx);
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(c.dim));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.set_u32("llama.block_count", static_cast<uint32_t>(c.n_layers));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(head_size));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);  // llama2.c's rmsnorm epsilon

  w.add_tensor("token_embd.weight", DType::F32, {dim, n_vocab}, bytes_of(token_embedding, n_vocab * dim));
  w.add_tensor("output_norm.weight", DType::F32, {dim}, bytes_of(rms_final, dim));
  w.add_tensor("output.weight", DType::F32, {dim, n_vocab}, bytes_of(wcls, n_vocab * dim));
  const size_t f = sizeof(float);
  for (int64_t l = 0; l < L; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    const auto lz = static_cast<size_t>(l);
    w.add_tensor(blk + "attn_q.weight", DType::F32, {dim, dim},
                 bytes_of(wq + lz * static_cast<size_t>(dim * dim) * f, dim * dim));
    w.add_tensor(blk + "attn_k.weight", DType::F32, {dim, kv_dim},
                 bytes_of(wk + lz * static_cast<size_t>(kv_dim * dim) * f, kv_dim * dim));
    w.add_tensor(blk + "attn_v.weight", DType::F32, {dim, kv_dim},
                 bytes_of(wv + lz * static_cast<size_t>(kv_dim * dim) * f, kv_dim * dim));
    w.add_tensor(blk + "attn_output.weight", DType::F32, {dim, dim},
                 bytes_of(wo + lz * static_cast<size_t>(dim * dim) * f, dim * dim));
    w.add_tensor(blk + "attn_norm.weight", DType::F32, {dim},
                 bytes_of(rms_att + lz * static_cast<size_t>(dim) * f, dim));
    w.add_tensor(blk + "ffn_gate.weight", DType::F32, {dim, hidden},
                 bytes_of(w1 + lz * static_cast<size_t>(hidden * dim) * f, hidden * dim));
    w.add_tensor(blk + "ffn_down.weight", DType::F32, {hidden, dim},
                 bytes_of(w2 + lz * static_cast<size_t>(dim * hidden) * f, dim * hidden));
    w.add_tensor(blk + "ffn_up.weight", DType::F32, {dim, hidden},
                 bytes_of(w3 + lz * static_cast<size_t>(hidden * dim) * f, hidden * dim));
    w.add_tensor(blk + "ffn_norm.weight", DType::F32, {dim},
                 bytes_of(rms_ffn + lz * static_cast<size_t>(dim) * f, dim));
  }
  return w;
}

}  // namespace

Llama2cConfig read_llama2c_config(const std::string& model_bin) {
  const MappedFile file(model_bin);
  return parse_header(image_of(file));
}

Llama2cConfig parse_llama2c_config(const uint8_t* data, size_t size, const std::string& name) {
  return parse_header(Image{data, size, name});
}

Llama2cVocab parse_llama2c_tokenizer(const uint8_t* data, size_t size, const std::string& name,
                                     int32_t n_vocab) {
  if (n_vocab < 0) throw Error("llama2.c tokenizer '" + name + "': vocab_size " + std::to_string(n_vocab) + " is negative");
  return read_tokenizer(Image{data, size, name}, n_vocab);
}

std::vector<uint8_t> convert_llama2c_image(const uint8_t* model, size_t model_size,
                                           const uint8_t* tokenizer, size_t tokenizer_size,
                                           const Llama2cConvertOptions& options) {
  const Image model_image{model, model_size, "<memory model>"};
  const Llama2cConfig c = parse_header(model_image);
  return build_gguf(model_image, c, Image{tokenizer, tokenizer_size, "<memory tokenizer>"}, options)
      .to_bytes();
}

Llama2cConfig convert_llama2c(const std::string& model_bin, const std::string& tokenizer_bin,
                              const std::string& out_gguf, const Llama2cConvertOptions& options) {
  const MappedFile file(model_bin);
  const Llama2cConfig c = parse_header(image_of(file));
  const MappedFile tokenizer(tokenizer_bin);
  build_gguf(image_of(file), c, image_of(tokenizer), options).write(out_gguf);
  return c;
}

}  // namespace specdec
