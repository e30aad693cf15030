// specdec/convert.h — importing checkpoints from other formats into GGUF.
//
// llama2.c legacy checkpoints (Karpathy's run.c format): a header of seven int32 (dim,
// hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means
// the classifier is not shared with the token embedding), then fp32 arrays token_embedding
// (vocab, dim), rms_att (layers, dim), wq (layers, dim, dim), wk and wv (layers, kv_dim, dim),
// wo (layers, dim, dim), rms_ffn (layers, dim), w1 (layers, hidden, dim), w2 (layers, dim,
// hidden), w3 (layers, hidden, dim), rms_final (dim), freq_cis_real and freq_cis_imag
// (seq_len, head_size / 2 each; ignored), then wcls (vocab, dim) when not shared.
// Tokenizer files (tokenizer.bin): int32 max_token_length, then per token a float32 score, an
// int32 byte length and the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specdec {

struct Llama2cConfig {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // always positive here; see shared_classifier
  int32_t seq_len = 0;
  bool shared_classifier = true;
};

struct Llama2cConvertOptions {
  // llama.context_length to write. Absent: min(128, seq_len); 128 is what llama.cpp's
  // convert-llama2c-to-ggml writes by default (and what the shared stories260K.gguf carries).
  // 0: the checkpoint's seq_len. Otherwise it must be at most seq_len.
  std::optional<uint32_t> context_length;
};

// Reads and validates the header of a legacy llama2.c checkpoint, including that the file size
// matches what the header implies.
// Requires: nothing. Guarantees: a config whose shapes are consistent (dim divisible by
// n_heads, n_heads by n_kv_heads, even head size) or Error naming the file and the bad field.
// Cost: maps the file, O(1) reads.
Llama2cConfig read_llama2c_config(const std::string& model_bin);

// Converts a legacy llama2.c checkpoint and its tokenizer.bin into a GGUF (version 3, F32
// weights, llama architecture, "llama" SentencePiece tokenizer with <unk>=0, <s>=1, </s>=2),
// equivalent to llama.cpp's convert-llama2c-to-ggml: same metadata keys and values, same
// tensor names, shapes and bytes. The output is written atomically (PATH.tmp, then rename).
// Requires: readable inputs; tokenizer.bin holding exactly vocab_size tokens.
// Guarantees: returns the checkpoint's config; Error naming the file and the problem for a
// truncated or oversized file, an absurd header, a tokenizer that does not match.
// Cost: O(file size) time, about twice the model size in memory.
Llama2cConfig convert_llama2c(const std::string& model_bin, const std::string& tokenizer_bin,
                              const std::string& out_gguf, const Llama2cConvertOptions& options = {});

// ---- From-memory entry points (fuzzing, tests). `name` stands for the path in messages.

// The vocabulary read from a tokenizer.bin image, as it is written to GGUF.
struct Llama2cVocab {
  std::vector<std::string> tokens;  // (n_vocab) text, spaces written as U+2581
  std::vector<float> scores;        // (n_vocab)
  std::vector<int32_t> types;       // (n_vocab) GGUF token types (1 normal, 2 unknown, 3 control, 6 byte)
};

// read_llama2c_config on the image [data, data + size) (not copied, not kept).
// Requires: data readable for size bytes. Guarantees: as read_llama2c_config. Cost: O(1).
Llama2cConfig parse_llama2c_config(const uint8_t* data, size_t size, const std::string& name);

// Reads a tokenizer.bin image that must hold exactly n_vocab tokens.
// Requires: data readable for size bytes. Guarantees: n_vocab entries, or Error naming `name`,
// the token and the offset for a truncated, oversized or negative-length entry. Cost: O(size).
Llama2cVocab parse_llama2c_tokenizer(const uint8_t* data, size_t size, const std::string& name,
                                     int32_t n_vocab);

// convert_llama2c on in-memory images; returns the GGUF file's bytes instead of writing it.
// Requires/guarantees: as convert_llama2c. Cost: O(model size) time, about three times the
// model size in memory.
std::vector<uint8_t> convert_llama2c_image(const uint8_t* model, size_t model_size,
                                           const uint8_t* tokenizer, size_t tokenizer_size,
                                           const Llama2cConvertOptions& options = {});

}  // namespace specdec
