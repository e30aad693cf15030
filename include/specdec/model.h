// specdec/model.h — Llama-family decoder: config from GGUF metadata, weights as typed views
// into the mapped file, a KV cache per sequence, and a batched forward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specdec/cache_line_vector.h"
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

// K and V for one sequence: (n_layers, n_kv_heads, n_ctx, head_dim) each (head-major: a kv
// head's keys are contiguous, see layer_k), F32 or F16 (type()). F16 halves
// the memory and the bytes attention reads per key; values are rounded to nearest on write
// (write()), and attention computes in F32 on the rounded values, so every batch-invariance
// property holds for either type (a row's result still depends on its own tokens only).
// Slots [0, size()) hold the committed positions 0..size()-1 in order.
class KvCache {
 public:
  // type: DType::F32 or DType::F16 (Error otherwise, naming it).
  KvCache(const ModelConfig& config, int n_ctx, DType type = DType::F32);
  int size() const { return n_used_; }
  int capacity() const { return n_ctx_; }
  // O(1): keep positions [0, n). Requires 0 <= n <= size().
  void truncate(int n);
  // After a forward appended rows at slots [first, size()), keep only rows[i] (offsets from
  // first, strictly increasing) and move them to slots first, first+1, ...; size() becomes
  // first + rows.size(). Cost: copies 2 * n_layers * rows.size() * row_bytes() bytes.
  void keep_rows(int first, std::span<const int> rows);
  DType type() const { return type_; }
  size_t row_bytes() const { return row_bytes_; }  // one slot's K (or V): kv_dim elements
  size_t head_bytes() const { return row_bytes_ / static_cast<size_t>(n_kv_heads_); }  // head_dim elements
  // Stores slot `slot` of `layer`: k and v (kv_dim floats each, kv heads one after the other),
  // rounded to F16 for an F16 cache.
  void write(int layer, int slot, const float* k, const float* v);
  // Layout: head-major, (n_layers, n_kv_heads, capacity, head_dim) for K and for V, so that one
  // kv head's keys are contiguous and stream in order (attention reads a head's keys for all
  // the rows and query heads of its group). Element strides for attention(): slot_stride()
  // between slots, head_stride() between kv heads, from layer_k(layer) / layer_v(layer).
  const void* layer_k(int layer) const { return at(k32_, k16_, layer, 0, 0); }
  const void* layer_v(int layer) const { return at(v32_, v16_, layer, 0, 0); }
  size_t slot_stride() const { return static_cast<size_t>(head_dim_); }
  size_t head_stride() const { return static_cast<size_t>(n_ctx_) * static_cast<size_t>(head_dim_); }
  // One kv head of one slot, any type: head_bytes() bytes.
  const void* k_head(int layer, int kv_head, int slot) const { return at(k32_, k16_, layer, kv_head, slot); }
  const void* v_head(int layer, int kv_head, int slot) const { return at(v32_, v16_, layer, kv_head, slot); }
  // F32 caches only (checked): one kv head of one slot as head_dim floats.
  float* k(int layer, int kv_head, int slot) { return k32_.data() + f32_offset(layer, kv_head, slot); }
  float* v(int layer, int kv_head, int slot) { return v32_.data() + f32_offset(layer, kv_head, slot); }
  const float* k(int layer, int kv_head, int slot) const { return k32_.data() + f32_offset(layer, kv_head, slot); }
  const float* v(int layer, int kv_head, int slot) const { return v32_.data() + f32_offset(layer, kv_head, slot); }
  // Whether slot `slot` holds the same K and V bytes as `other`'s slot `other_slot` in every
  // layer and kv head (same shape and type required; false otherwise).
  bool same_slot(int slot, const KvCache& other, int other_slot) const;
  int kv_dim() const { return kv_dim_; }
  int n_layers() const { return n_layers_; }
  // Used by the forward pass: reserve n slots at the end (Error when past capacity).
  int append(int n);
  size_t bytes() const { return 2 * row_bytes_ * static_cast<size_t>(n_layers_) * static_cast<size_t>(n_ctx_); }

 private:
  size_t offset(int layer, int kv_head, int slot) const;      // in elements
  size_t f32_offset(int layer, int kv_head, int slot) const;  // checks type() == F32
  const void* at(const CacheLineVector<float>& f32, const CacheLineVector<uint16_t>& f16, int layer, int kv_head,
                 int slot) const;
  int n_layers_, n_ctx_, kv_dim_, n_kv_heads_, head_dim_;
  DType type_;
  size_t row_bytes_;
  int n_used_ = 0;
  // Each starts on a cache line, so a kv head's rows do when head_bytes() is a multiple of 64.
  CacheLineVector<float> k32_, v32_;     // (n_layers, n_kv_heads, n_ctx, head_dim), F32 caches
  CacheLineVector<uint16_t> k16_, v16_;  // (n_layers, n_kv_heads, n_ctx, head_dim), F16 caches
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
  // (N) 1 = return this row's features (struct Features), or empty: no row asks. add() keeps it
  // empty until a row asks (then pads it with 0s). No row asking costs nothing.
  std::vector<uint8_t> want_features;
  // Optional (all empty: unused): token trees that stay in the cache between forwards. Row i
  // then sees only the cache prefix [0, visible_prefix[i]) (-1: the whole cache; equal for all
  // rows of a sequence), then its ancestors forwarded earlier, the cache slots
  // cache_ancestors[cache_ancestor_begin[i] .. cache_ancestor_begin[i + 1]) (increasing, root
  // first, in [visible_prefix, cache size)), then its batch ancestors and itself. A row with a
  // batch parent lists none and inherits those of its batch root. Position = visible prefix +
  // cache ancestors + batch depth. Results equal those of the root-to-row path as a chain.
  std::vector<int32_t> visible_prefix;        // (N) or empty
  std::vector<int32_t> cache_ancestor_begin;  // (N + 1) or empty
  std::vector<int32_t> cache_ancestors;       // (sum of the rows' counts) cache slots
  int size() const { return static_cast<int>(tokens.size()); }
  void clear();
  // Appends a row; parent is an absolute row index in this batch or -1. In a batch using the
  // optional arrays, the row sees its whole cache and has no cache ancestors.
  void add(Token token, int32_t position, int32_t parent, int32_t seq, bool logits, bool features = false);
  // Appends a row of a tree kept in the cache (see visible_prefix); switches the optional
  // arrays on (rows added before see their whole cache).
  void add_cached_tree_row(Token token, int32_t position, int32_t parent, int32_t seq, bool logits,
                           int32_t visible, std::span<const int32_t> ancestor_slots);
};

// Logits for the rows that asked: (n_rows_out, n_vocab) in batch order, with the batch row of each.
struct Logits {
  int n_vocab = 0;
  std::vector<int32_t> batch_row;  // (n_rows_out)
  std::vector<float> data;         // (n_rows_out, n_vocab)
  const float* row(int i) const { return data.data() + static_cast<size_t>(i) * n_vocab; }
  int n_rows() const { return static_cast<int>(batch_row.size()); }
};

// Hidden states of the rows that asked (Batch::want_features), in batch order. The feature of a
// row (docs/HEADS.md) is its final hidden state after output_norm: output_head(final row) gives
// exactly the row's logits. Like logits, features are batch invariant (bit-identical whatever
// batch the row is in). Cost: one rmsnorm per feature row + copies of the requested layers.
struct Features {
  // Input (EAGLE-3 style fusion): also return the residual stream after each of these blocks
  // (0-based, in [0, n_layers), in this order); empty: only the final feature.
  std::vector<int32_t> layers;
  // Outputs of forward():
  int n_embd = 0;
  std::vector<int32_t> batch_row;  // (n_rows_out)
  std::vector<float> final;        // (n_rows_out, n_embd) after output_norm
  std::vector<float> residual;     // (n_rows_out, layers.size(), n_embd) before any norm
  int n_rows() const { return static_cast<int>(batch_row.size()); }
  const float* row(int i) const { return final.data() + static_cast<size_t>(i) * n_embd; }
  const float* layer_row(int i, int j) const {
    return residual.data() + (static_cast<size_t>(i) * layers.size() + static_cast<size_t>(j)) * n_embd;
  }
};

struct ModelOptions {
  int n_threads = 0;        // 0: physical cores
  DType kv_type = DType::F32;  // new_cache()'s K/V type: F32 or F16 (KvCache)
  // Copy the weights the active ISA prefers in another layout (repacked_bytes: Q8_0 on AVX2)
  // into that layout at load, releasing their mapped pages as it goes: faster matmuls, the
  // same bits. false keeps every weight in the mapping (no copy, instant load).
  bool repack_weights = true;
};

// Where a forward's wall time goes (`specdec bench --profile`): nanoseconds per phase, summed
// over layers and forwards since the struct was zeroed. Phases run one after another on the
// calling thread (each parallel phase is timed until its last task is done), so with
// other_ns() (embedding, batch planning) they add up to total_ns. The norms and swiglu run
// inside the projection calls that read them (matmul's prologue), so their time is in those
// phases: "norm+qkv", "norm+gate_up", "swiglu+down", and the final norm's in "output". A block
// that splits its rows between the threads (prefill-sized batches, model/llama_block.h) is
// timed by the calling thread's rows: its rope and K/V writes are in "norm+qkv" (rope_kv stays
// 0), and its waits for the other threads in "norm+qkv" and "swiglu+down".
struct ForwardProfile {
  enum Phase { kNormQkv, kRopeKv, kAttention, kWo, kNormGateUp, kSwigluDown, kOutput, kPhases };
  static const char* name(int phase);  // "norm+qkv", "rope_kv", ...
  int64_t ns[kPhases] = {};
  int64_t total_ns = 0;
  int64_t forwards = 0;
  int64_t other_ns() const;
};

class Transformer {
 public:
  // Opens and maps the GGUF; validates every tensor's presence, type and shape against the
  // config (Error naming the tensor). Weights stay in the mapping, except those repacked
  // (ModelOptions::repack_weights).
  static std::unique_ptr<Transformer> load(const std::string& path, const ModelOptions& options = {});
  ~Transformer();

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return *gguf_; }
  ThreadPool& pool() { return *pool_; }
  // Bytes of weights streamed by one forward (all matmul weights + embeddings row).
  size_t weight_bytes() const;
  // Bytes of the weights copied into a repacked layout at load (0 with repack_weights off or
  // on the scalar path).
  size_t repacked_weight_bytes() const { return repacked_weight_bytes_; }
  // Whether a forward of n_rows rows of one sequence splits each block's rows between the
  // pool's threads (each thread runs the block on its own rows) rather than each matmul's
  // outputs: prefill-sized batches of models whose activations outweigh a second weight pass
  // (model/llama_block.h). The same bits either way; for reports (`specdec bench`).
  bool splits_rows(int n_rows) const;

  // Runs the batch; caches[batch.seq[i]] is row i's cache. Validates the batch (positions,
  // parents, capacity) and throws Error on a bad one before touching any cache.
  // Cost: one pass over the weights for all N rows.
  void forward(const Batch& batch, std::span<KvCache* const> caches, Logits& out);
  // The same, also filling `features` for the rows with want_features (features may be null
  // when no row asks; Error when one asks without it, or a requested layer is out of range).
  void forward(const Batch& batch, std::span<KvCache* const> caches, Logits& out, Features* features);

  // dst (n_embd) = the token's embedding row (Error for an id outside the vocabulary).
  void embed(Token token, float* dst) const;
  // The output head on hidden states h (n_rows, n_embd) -> logits (n_rows, n_vocab), no norm:
  // on a feature it reproduces the row's logits bit for bit. Cost: one pass over output.weight.
  void output_head(const float* h, int n_rows, float* logits);
  // The output head's (n_vocab, n_embd) matrix: a view into the mapping (the embeddings when
  // tied), valid while the model lives. For heads that score a subset of its rows.
  const WeightMatrix& output_matrix() const;

  // Forwards add their phase times to *profile until set_profile(nullptr) (the default: no
  // clock reads). Cost: ~25 clock reads per layer.
  void set_profile(ForwardProfile* profile) { profile_ = profile; }

  // Convenience: a fresh cache sized n_ctx (0: the model's context length) of ModelOptions::kv_type.
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
  DType kv_type_ = DType::F32;
  size_t repacked_weight_bytes_ = 0;
  ForwardProfile* profile_ = nullptr;
};

}  // namespace specdec
