// model/weights.h — the model's tensors as typed views into the mapped GGUF (internal).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "specdec/kernels.h"
#include "specdec/model.h"

namespace specdec {

class ThreadPool;

struct LayerWeights {
  std::vector<float> attn_norm;   // (n_embd)
  WeightMatrix wq, wk, wv, wo;    // (q_dim, n_embd), (kv_dim, n_embd) x2, (n_embd, q_dim)
  std::vector<float> bq, bk, bv;  // (q_dim), (kv_dim), (kv_dim); empty without qkv_bias
  std::vector<float> ffn_norm;    // (n_embd)
  WeightMatrix w_gate, w_up;      // (n_ff, n_embd)
  WeightMatrix w_down;            // (n_embd, n_ff)
};

// A (n_out, n_in) weight matrix named `name` (GGUF dims {n_in, n_out}, any weight type).
// Error naming the file and tensor when it is missing or has another shape or type.
WeightMatrix matrix(const GgufFile& gguf, const std::string& name, int64_t n_in, int64_t n_out);
// A 1-D tensor of n values (F32, F16 or BF16) converted to owned F32; Error as above.
std::vector<float> vector_f32(const GgufFile& gguf, const std::string& name, int64_t n);
// One decoder block's tensors `<prefix>attn_norm.weight` ... `<prefix>ffn_down.weight`,
// validated against the config (Q/K/V biases when config.qkv_bias).
LayerWeights load_layer_weights(const GgufFile& gguf, const ModelConfig& config, const std::string& prefix);

struct Transformer::Weights {
  WeightMatrix token_embd;          // (n_vocab, n_embd), any weight type
  std::vector<float> output_norm;   // (n_embd)
  WeightMatrix output;              // (n_vocab, n_embd); = token_embd when tied
  std::vector<float> rope_freqs;    // (n_rot / 2) Llama-3.1 frequency factors, or empty
  std::vector<LayerWeights> layers; // (n_layers)
  struct FreeBytes {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, FreeBytes>> repacked;  // the repacked matrices' bytes

  // Finds every tensor the config needs and checks its type and shape; 1-D tensors (norms,
  // biases, rope factors) are converted to owned F32. Error names the tensor and the problem.
  static std::unique_ptr<Weights> load(const GgufFile& gguf, const ModelConfig& config);
  // Copies every matrix the active ISA reads faster in another layout (repacked_bytes: the layer
  // matrices and the output head; with tied embeddings that is token_embd, whose rows embed()
  // then gathers back with copy_weight_row) into that layout, 256 rows per task of `pool`,
  // releasing each copied range of the mapping. The outputs of every forward are unchanged to
  // the bit. Returns the bytes repacked. Cost: one
  // pass over them, split over the pool (1B Q4_K_M on 2 Zen 3 cores: ~0.5 s, 0.7-1.0 s on one).
  size_t repack(const GgufFile& gguf, ThreadPool& pool);
  // Drops every page of the mapping that no matrix still read from it (layout RowMajor, and
  // token_embd) touches: the header, the norms and biases (copied at load), the repacked
  // tensors' pages shared with their neighbours, which repack() keeps. Cost: O(n_layers).
  void release_unread_pages(const GgufFile& gguf) const;
  // Bytes of all matrices one forward streams (output once, plus one embedding row).
  size_t streamed_bytes() const;
  // dst (n_embd) = row `token` of token_embd, dequantized.
  void embed(Token token, float* dst) const;
};

}  // namespace specdec
