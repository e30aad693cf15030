// tests/common/tiny_model.h — random-weight GGUF models made with the project's own writer.
//
// Used wherever a test needs a model whose shape, weight type or architecture the shared
// fixtures lack (batch invariance, quantized forward passes, draft/target pairs).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "specdec/dtype.h"
#include "specdec/gguf.h"

namespace specdec::testing {

struct TinyModelSpec {
  int n_vocab = 300;        // >= 8; >= 259 gives every byte its <0xXX> token (byte fallback)
  int n_embd = 64;          // multiple of the weight type's block size (32, or 256 for *_K)
  int n_layers = 2;
  int n_heads = 4;
  int n_kv_heads = 2;       // divides n_heads
  int n_ff = 96;            // multiple of the weight type's block size
  int n_ctx = 128;          // <arch>.context_length
  uint64_t seed = 1;
  DType weight_type = DType::F32;  // every 2-D weight (token_embd included); norms, biases F32
  std::string arch = "llama";      // "llama" | "qwen2" (Q/K/V biases, tied output, NEOX rope)
  // Extras (defaults follow the architecture):
  int tied_output = -1;            // -1: arch default (qwen2 tied, llama untied); 0/1 forces
  float freq_base = 10000.0f;
  bool rope_freqs = false;         // llama: add a rope_freqs.weight tensor (Llama-3.1 factors)
  float weight_scale = 1.0f;       // multiplies every random weight (larger: peakier logits)
};

// Writes a GGUF (version 3) with random weights drawn from spec.seed and a minimal valid
// SentencePiece-style ("llama") tokenizer: <unk>=0, <s>=1 (BOS), </s>=2 (EOS), then the 256
// byte tokens <0x00>..<0xFF> when n_vocab >= 259, then normal pieces ("▁the", "e", ...).
// Requires: a valid spec (Error naming the field otherwise). Guarantees: same spec, same bytes.
// Cost: O(parameters); a default spec writes ~100 KB.
void write_random_llama(const std::string& path, const TinyModelSpec& spec);

// Convenience: writes the model to temp_dir()/name and returns that path.
std::string make_random_llama(const std::string& name, const TinyModelSpec& spec);

// Copies src_gguf to dst (metadata, alignment and tensors unchanged), letting `edit` set or
// replace metadata keys first: a model with another EOS token, a chat template, ...
// Requires: src_gguf readable. Cost: O(file size).
void write_edited_copy(const std::string& src_gguf, const std::string& dst,
                       const std::function<void(GgufWriter&)>& edit);

}  // namespace specdec::testing
