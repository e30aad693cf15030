// specdec/heads.h — self-speculation heads trained for one target model (Medusa heads, the
// EAGLE draft layer), loaded from their own GGUF files. Layouts, the feature definition and
// the target fingerprint: docs/HEADS.md. The drafters using them are in specdec/heads_drafter.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "specdec/model.h"

namespace specdec {

class GgufFile;
struct LayerWeights;

// FNV-1a 64-bit over the target's tokenizer.ggml.tokens (each string's bytes + 0x00) and then
// "n_vocab=V,n_embd=E,n_layers=L,n_heads=H,n_kv_heads=K,n_ff=F", as 16 lowercase hex digits.
// Error naming the file when the target has no tokenizer.ggml.tokens. Cost: O(vocabulary bytes).
std::string target_fingerprint(const Transformer& target);
std::string target_fingerprint(const std::vector<std::string>& tokens, const ModelConfig& config);

// Medusa-1 heads: head k maps the feature f_t to a hidden state whose output-head logits
// predict x_{t+k+2}: h = f_t; per block j: h = h + SiLU(W_kj h + b_kj).
class MedusaHeads {
 public:
  // Opens and validates `path` against `target` (architecture "medusa", every key and its type,
  // embedding length, fingerprint, every tensor's presence, type and shape, no unknown tensors).
  // Throws Error naming the file and the offending key/tensor/value; a fingerprint mismatch
  // names both files and both fingerprints. Weights stay in the mapping (no copy).
  static std::unique_ptr<MedusaHeads> load(const std::string& path, const Transformer& target);
  ~MedusaHeads();

  int n_heads() const { return n_heads_; }
  int n_blocks() const { return n_blocks_; }
  int n_embd() const { return n_embd_; }
  const std::string& path() const;
  // The candidate tree tuned for these heads (optional key medusa.tree_choices, docs/HEADS.md):
  // choices in the order of MedusaOptions::choices; empty when the file has none.
  const std::vector<std::vector<int>>& tree() const { return tree_; }
  // hidden (n_heads, n_embd): every head's state for one feature (n_embd); apply the target's
  // output_head to get the heads' logits. Cost: n_heads * n_blocks matrix-vector products.
  void hidden(const float* feature, float* hidden, ThreadPool* pool) const;

 private:
  MedusaHeads();
  struct Block;
  std::unique_ptr<GgufFile> gguf_;
  std::vector<Block> blocks_;  // (n_heads * n_blocks) head-major
  std::vector<std::vector<int>> tree_;  // (n_choices, depth)
  int n_heads_ = 0, n_blocks_ = 0, n_embd_ = 0;
};

// The EAGLE draft layer: u_t = fc(concat(E[x_{t+1}], f_t)), g_t = Block(u_t; position t; its own
// KV cache); g_t approximates f_{t+1}, and the target's output_head(g_t) gives the draft
// distribution of x_{t+2}. The block is a standard Llama block (computed by the same code as
// the target's blocks).
class EagleLayer {
 public:
  // Opens and validates `path` against `target` (as MedusaHeads::load; architecture "eagle").
  // The target must outlive the layer (its embeddings and thread pool are used).
  static std::unique_ptr<EagleLayer> load(const std::string& path, Transformer& target);
  ~EagleLayer();

  // The block's shapes: n_layers 1, the target's n_vocab and n_embd, the file's heads/FFN/RoPE.
  const ModelConfig& config() const { return config_; }
  const std::string& path() const;
  // A cache for the layer's K/V (n_ctx 0: the file's context length).
  KvCache new_cache(int n_ctx = 0) const;
  // EAGLE-3 style fusion (eagle.fuse_layers, docs/HEADS.md): the target blocks whose residual
  // stream the layer reads, empty for none. A verified row is [r^{l_1}_t, .., r^{l_k}_t, f_t]
  // (feature_width() = (k + 1) * n_embd floats); fuse() maps such rows to the feature slot
  // fuse(row) (n_embd), or copies f_t without fusion. Cost: one (k+1)·n_embd x n_embd matmul.
  const std::vector<int32_t>& fuse_layers() const { return fuse_layers_; }
  int feature_width() const { return (static_cast<int>(fuse_layers_.size()) + 1) * config_.n_embd; }
  void fuse(const float* verified, int n_rows, float* out);
  // Rows as for Transformer::forward (chains, trees, cached-tree rows), where row i's token is
  // x_{t+1}, its position t and inputs row i (n_embd) the feature f_t it is fed (the target's,
  // or a drafted g). out (N, n_embd) = g_t. want_logits/want_features are ignored.
  // Validates the batch (Error) before touching the cache. Cost: fc + one block over N rows.
  void forward(const Batch& batch, const float* inputs, KvCache& cache, float* out);
  // A reduced draft vocabulary (eagle.draft_vocab, docs/HEADS.md): the token ids, ascending,
  // the layer may draft; empty for the whole vocabulary.
  const std::vector<Token>& draft_vocab() const { return draft_vocab_; }
  // logits (n_rows, n_vocab) = Output(g) for g (n_rows, n_embd): the target's output head, or
  // with a draft vocabulary its rows only (bit for bit the full head's values there) and -inf
  // elsewhere, so the draft never proposes another token. Cost: one pass over the target's
  // output matrix, or over |draft vocab| of its rows (copied at load).
  void draft_logits(const float* g, int n_rows, float* logits);

 private:
  explicit EagleLayer(Transformer& target);
  struct Weights;
  static void load_draft_vocab(EagleLayer& layer, Weights& weights);
  Transformer& target_;
  ModelConfig config_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Weights> weights_;
  std::vector<int32_t> fuse_layers_;  // target blocks fused with f_t, or empty
  std::vector<Token> draft_vocab_;    // ascending token ids the layer drafts, or empty: all
};

}  // namespace specdec
