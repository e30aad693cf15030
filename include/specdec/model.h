// specdec/model.h — Llama-family decoder: config from GGUF metadata, weights as typed views
// into the mapped file, a KV cache per sequence, and a batched forward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specdec/kernels.h"

namespace specdec {

class GgufFile;
class ThreadPool;

using Token = int32_t;

// Hyperparameters, read from `<arch>.*` keys. Required keys missing -> Error naming the key.
struct ModelConfig {
  std::string arch;           // "llama" | "qwen2"
  std::string name;           // general.name, may be empty
  int n_vocab = 0;
  int n_embd = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;           // n_embd / n_heads unless the file says otherwise
  int n_ff = 0;
  int n_ctx_train = 0;        // <arch>.context_length
  float rms_eps = 1e-5f;
  RopeParams rope;            // n_rot, freq base/scale, layout (freq_factors filled by the model)
  bool tied_output = false;   // no output.weight: the logits reuse token_embd.weight
  bool qkv_bias = false;      // qwen2
  int kv_dim() const { return n_kv_heads * head_dim; }
  int q_dim() const { return n_heads * head_dim; }
};

// Supported architectures, for error messages: "llama, qwen2".
const char* supported_architectures();
ModelConfig read_model_config(const GgufFile& gguf);

// K and V for one sequence: (n_layers, n_ctx, kv_dim) each, F32.
// Slots [0, size()) hold the committed positions 0..size()-1 in order.
class KvCache {
 public:
  KvCache(const ModelConfig& config, int n_ctx);
  int size() const { return n_used_; }
  int capacity() const { return n_ctx_; }
  // O(1): keep positions [0, n). Requires 0 <= n <= size().
  void truncate(int n);
  // After a forward appended rows at slots [first, size()), keep only rows[i] (offsets from
  // first, strictly increasing) and move them to slots first, first+1, ...; size() becomes
  // first + rows.size(). Cost: copies 2 * n_layers * rows.size() * kv_dim floats.
  void keep_rows(int first, std::span<const int> rows);
  // Slot data (n_layers, n_ctx, kv_dim).
  float* k(int layer, int slot) { return k_.data() + (static_cast<size_t>(layer) * n_ctx_ + slot) * kv_dim_; }
  float* v(int layer, int slot) { return v_.data() + (static_cast<size_t>(layer) * n_ctx_ + slot) * kv_dim_; }
  const float* k(int layer, int slot) const { return k_.data() + (static_cast<size_t>(layer) * n_ctx_ + slot) * kv_dim_; }
  const float* v(int layer, int slot) const { return v_.data() + (static_cast<size_t>(layer) * n_ctx_ + slot) * kv_dim_; }
  int kv_dim() const { return kv_dim_; }
  int n_layers() const { return n_layers_; }
  // Used by the forward pass: reserve n slots at the end (Error when past capacity).
  int append(int n);
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  int n_layers_, n_ctx_, kv_dim_;
  int n_used_ = 0;
  std::vector<float> k_, v_;  // (n_layers, n_ctx, kv_dim)
};

// N rows processed in one call. Rows of one sequence are appended to that sequence's cache in
// batch order. Row i attends to its sequence's cache prefix (as it was before the call) plus
// its ancestors in the batch (parent chain) and itself. A chain has parent[i] = i - 1 (the
// first row of a sequence has parent -1); a token tree is another parent array.
struct Batch {
  std::vector<Token> tokens;      // (N)
  std::vector<int32_t> positions; // (N) absolute position (RoPE); = prefix length + depth
  std::vector<int32_t> parent;    // (N) row index of the parent (< i, same sequence) or -1
  std::vector<int32_t> seq;       // (N) index into the caches span
  std::vector<uint8_t> want_logits;  // (N) 1 = return this row's logits
  int size() const { return static_cast<int>(tokens.size()); }
  void clear();
  // Appends a row; parent is an absolute row index in this batch or -1.
  void add(Token token, int32_t position, int32_t parent, int32_t seq, bool logits);
};

// Logits for the rows that asked: (n_rows_out, n_vocab) in batch order, with the batch row of each.
struct Logits {
  int n_vocab = 0;
  std::vector<int32_t> batch_row;  // (n_rows_out)
  std::vector<float> data;         // (n_rows_out, n_vocab)
  const float* row(int i) const { return data.data() + static_cast<size_t>(i) * n_vocab; }
  int n_rows() const { return static_cast<int>(batch_row.size()); }
};

struct ModelOptions {
  int n_threads = 0;        // 0: physical cores
};

class Transformer {
 public:
  // Opens and maps the GGUF; validates every tensor's presence, type and shape against the
  // config (Error naming the tensor). Weights stay in the mapping (no copy).
  static std::unique_ptr<Transformer> load(const std::string& path, const ModelOptions& options = {});
  ~Transformer();

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return *gguf_; }
  ThreadPool& pool() { return *pool_; }
  // Bytes of weights streamed by one forward (all matmul weights + embeddings row).
  size_t weight_bytes() const;

  // Runs the batch; caches[batch.seq[i]] is row i's cache. Validates the batch (positions,
  // parents, capacity) and throws Error on a bad one before touching any cache.
  // Cost: one pass over the weights for all N rows.
  void forward(const Batch& batch, std::span<KvCache* const> caches, Logits& out);

  // Convenience: a fresh cache sized n_ctx (0: the model's context length).
  KvCache new_cache(int n_ctx = 0) const;

 private:
  Transformer() = default;
  struct Weights;
  struct Scratch;
  ModelConfig config_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Weights> weights_;
  std::unique_ptr<Scratch> scratch_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace specdec
