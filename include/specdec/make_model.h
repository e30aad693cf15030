// specdec/make_model.h — making model files: random-weight Llama models of realistic shapes
// (for benchmarks and tests), noisy copies of a model (stand-in drafts) and quantization of
// GGUF files with llama.cpp's presets.
//
// All three stream: tensors are produced a chunk of rows at a time and written straight to the
// output (PATH.tmp, renamed when complete), so memory stays at a few MiB plus the mapped input,
// whatever the model size. Rows are independent, so the output does not depend on the thread
// count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "specdec/dtype.h"

namespace specdec {

class ThreadPool;

// ---- quantization presets (llama.cpp's `quantize` file types)
struct QuantPreset {
  std::string name;        // "Q4_K_M"
  DType base_type = DType::F32;  // the type most 2-D weights get (Q4_K for Q4_K_M)
  uint32_t file_type = 0;  // general.file_type (llama.cpp's llama_ftype number)
  bool pure = false;       // every 2-D weight in base_type (llama.cpp --pure): no upgrades
};

// Parses a TYPE argument: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M,
// Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K (case-insensitive; Q3_K/Q4_K/Q5_K mean the _M
// presets, as in llama.cpp). Throws Error listing the valid names. `pure` as in QuantPreset.
QuantPreset quant_preset(const std::string& name, bool pure = false);
// The valid preset names, for help texts.
std::vector<std::string> quant_preset_names();

// What the per-tensor rules need to know about the model.
struct TensorTypeContext {
  int n_layers = 0;
  int n_gqa = 1;            // n_heads / n_kv_heads
  bool has_output = true;   // false: token_embd doubles as the output matrix (tied)
};

// The type llama.cpp's rules give a tensor under `preset` (non-pure presets): output.weight (or
// a tied token_embd) Q6_K; attn_v / ffn_down of some layers one or two steps up (Q4_K_M and
// Q5_K_M: Q6_K on the layers llama.cpp's use_more_bits picks; Q3_K_M: Q5_K/Q4_K; Q2_K: Q3_K or
// Q4_K); attn_output up for Q2_K/Q3_K_*. Rows whose length (dims[0]) is not a multiple of 256
// fall back from K-quants to legacy types: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// Q2_K/Q3_K -> Q4_0 (llama.cpp uses IQ4_NL there, which we do not implement).
// Tensors that are not 2-D ".weight" matrices return F32 (norms stay F32).
// Requires: dims in GGUF order. Cost: O(length of name).
DType preset_tensor_type(const QuantPreset& preset, const std::string& tensor_name,
                         const std::vector<int64_t>& dims, const TensorTypeContext& context);

// Progress callback: (tensors done, tensor count, name of the tensor just written).
using ModelFileProgress = std::function<void(size_t done, size_t total, const std::string& name)>;

// ---- quantizing a GGUF file
struct QuantizeModelStats {
  uint64_t n_tensors = 0;
  uint64_t n_quantized = 0;      // tensors converted to another type
  uint64_t bytes_in = 0;         // tensor data bytes read
  uint64_t bytes_out = 0;        // tensor data bytes written
  std::vector<std::pair<std::string, DType>> types;  // (tensor name, type written), file order
};

// Writes `out_path`: the metadata of `in_path` (general.file_type and
// general.quantization_version set for the preset, general.alignment dropped: 32), every tensor
// in the type preset_tensor_type gives it (2-D weights; others keep their type), converting
// through float32 rows with dequantize_row / quantize_row (re-quantizing a quantized input is
// allowed and loses precision). Requires: in_path a readable GGUF (Error otherwise), n_layers
// from `<arch>.block_count` when present. pool may be nullptr. Cost: one pass over the weights.
QuantizeModelStats quantize_model(const std::string& in_path, const std::string& out_path,
                                  const QuantPreset& preset, ThreadPool* pool,
                                  const ModelFileProgress& progress = nullptr);

// ---- noisy copies (stand-in draft models)
struct NoisyCopyStats {
  uint64_t n_tensors = 0;
  uint64_t n_noisy = 0;   // floating-point or quantized tensors that got noise
  uint64_t n_bytes = 0;   // tensor data bytes written
};

// Writes `out_path`: `in_path` with noise added to every floating-point or quantized tensor
// (norms and biases included): each row x becomes x + noise_scale * rms(x) * u, u uniform with
// unit variance, re-quantized to the tensor's own type. Metadata (tokenizer included), types
// and shapes are unchanged, so the result is a "draft model" of the source that agrees with it
// partly (on stories260K, noise 0.1 gave a greedy acceptance of about 0.5 with K = 4, noise 0.3
// about 0.03). Requires: in_path a readable GGUF, noise_scale >= 0 (Error
// otherwise). Guarantees: same (input, noise_scale, seed) -> same bytes, any thread count.
// pool may be nullptr. Cost: one pass over the weights, O(chunk) memory.
NoisyCopyStats make_noisy_copy(const std::string& in_path, const std::string& out_path, float noise_scale,
                               uint64_t seed, ThreadPool* pool = nullptr, const ModelFileProgress& progress = nullptr);

// ---- random-weight Llama models
struct ModelShape {
  std::string name;
  int n_embd = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, n_ff = 0, n_vocab = 0;
  int n_ctx = 0;             // llama.context_length
  bool tied_output = false;  // no output.weight: token_embd is the output matrix
};

// "tiny" (256/2/4/2/768, vocab 512), "llama-150m" (576/30/9/3/1536, tied, like SmolLM2-135M),
// "llama-1b" (2048/16/32/8/8192, like TinyLlama-1.1B), "llama-8b" (4096/32/32/8/14336, like
// Llama-3-8B but with vocab 32000); vocab 32000 and context 4096 for the three large ones.
// Throws Error listing the valid names.
ModelShape model_shape(const std::string& name);
std::vector<std::string> model_shape_names();

struct MakeModelStats {
  uint64_t n_params = 0;
  uint64_t n_bytes = 0;   // tensor data bytes written
  std::vector<std::pair<std::string, DType>> types;  // (tensor name, type), file order
};

// Writes a Llama model of `shape` with weights ~ N(0, 0.02) (norms 1) drawn from `seed`,
// quantized per `preset`, complete llama metadata and a synthetic SentencePiece ("llama")
// vocabulary: <unk> 0, <s> 1 (BOS), </s> 2 (EOS), byte tokens <0x00>..<0xFF>, then word and
// letter pieces up to n_vocab. Requires: a valid shape (n_vocab >= 300, head dims dividing).
// Guarantees: same (shape, preset, seed) -> same bytes, any thread count. pool may be nullptr.
// Cost: O(parameters) time (K-quant presets ~10x slower than Q8_0), O(rows per chunk) memory.
MakeModelStats make_model(const ModelShape& shape, const QuantPreset& preset, uint64_t seed,
                          const std::string& out_path, ThreadPool* pool,
                          const ModelFileProgress& progress = nullptr);

}  // namespace specdec
