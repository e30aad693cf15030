// model/transformer.cpp — loading and the batched forward pass of a Llama/Qwen2 decoder.
//
// forward(batch): every layer runs its matmuls once over all N rows (one weight pass), the
// per-row kernels (rmsnorm, bias, RoPE) row by row, and attention once per sequence over that
// sequence's cache. Every step computes a row from that row's inputs only, in a fixed order,
// so a row's logits never depend on the batch around it (see specdec/kernels.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "model/batch_plan.h"
#include "model/llama_block.h"
#include "model/weights.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/model.h"
#include "specdec/thread_pool.h"

namespace specdec {

// Activations of one forward, grown to the largest batch seen and reused across calls.
struct Transformer::Scratch {
  std::vector<float> x;        // (N, n_embd) residual stream
  BlockScratch block;          // the block's activations (llama_block.h)
  std::vector<float> final_x;  // (R, n_embd) normalized rows whose logits are wanted
  std::vector<float> rope;     // (N, n_rot) each row's (cos, sin) pairs, shared by all layers
};

Transformer::~Transformer() = default;

std::unique_ptr<Transformer> Transformer::load(const std::string& path, const ModelOptions& options) {
  std::unique_ptr<Transformer> t(new Transformer());
  t->gguf_ = GgufFile::open(path);
  t->config_ = read_model_config(*t->gguf_);
  t->weights_ = Weights::load(*t->gguf_, t->config_);
  if (options.n_threads < 0) throw Error("model: thread count " + std::to_string(options.n_threads) + " must be >= 0");
  t->pool_ = std::make_unique<ThreadPool>(options.n_threads);
  if (options.repack_weights) t->repacked_weight_bytes_ = t->weights_->repack(*t->gguf_, *t->pool_);
  t->weights_->release_unread_pages(*t->gguf_);
  t->config_.rope.freq_factors = t->weights_->rope_freqs.empty() ? nullptr : t->weights_->rope_freqs.data();
  t->scratch_ = std::make_unique<Scratch>();
  if (options.kv_type != DType::F32 && options.kv_type != DType::F16)
    throw Error(std::string("model: KV cache type ") + dtype_name(options.kv_type) + " is not supported (f32 or f16)");
  t->kv_type_ = options.kv_type;
  return t;
}

size_t Transformer::weight_bytes() const { return weights_->streamed_bytes(); }

bool Transformer::splits_rows(int n_rows) const {
  if (weights_->layers.empty() || n_rows < 1) return false;
  std::vector<SeqPlan> one(1);
  for (int r = 0; r < n_rows; ++r) one[0].rows.push_back(r);
  return block_splits_rows(weights_->layers[0], config_, one, n_rows, pool_->size());
}

KvCache Transformer::new_cache(int n_ctx) const {
  if (n_ctx == 0) n_ctx = config_.n_ctx_train;
  if (n_ctx < 0 || n_ctx > config_.n_ctx_train) {
    throw Error("context length " + std::to_string(n_ctx) + " outside [1, " +
                std::to_string(config_.n_ctx_train) + "] (the model's context length)");
  }
  return KvCache(config_, n_ctx, kv_type_);
}

void Transformer::forward(const Batch& batch, std::span<KvCache* const> caches, Logits& out) {
  forward(batch, caches, out, nullptr);
}

void Transformer::forward(const Batch& batch, std::span<KvCache* const> caches, Logits& out, Features* features) {
  const BatchPlan plan = plan_batch(batch, caches, config_);
  const ModelConfig& c = config_;
  const int n_rows = batch.size();
  const int n_out = static_cast<int>(plan.logit_rows.size());
  out.n_vocab = c.n_vocab;
  out.batch_row = plan.logit_rows;
  resize_discarding(out.data, static_cast<size_t>(n_out) * c.n_vocab);
  const int n_feat = static_cast<int>(plan.feature_rows.size());
  if (n_feat > 0 && features == nullptr) throw Error("batch: rows ask for features but no Features output was given");
  const size_t n_layer_feats = features ? features->layers.size() : 0;
  if (features) {
    for (int32_t l : features->layers) {
      if (l < 0 || l >= c.n_layers) {
        throw Error("features: layer " + std::to_string(l) + " outside [0, " + std::to_string(c.n_layers) + ")");
      }
    }
    features->n_embd = c.n_embd;
    features->batch_row = plan.feature_rows;
    resize_discarding(features->final, static_cast<size_t>(n_feat) * c.n_embd);
    resize_discarding(features->residual, static_cast<size_t>(n_feat) * n_layer_feats * c.n_embd);
  }
  if (n_rows == 0) return;

  for (const SeqPlan& sp : plan.seqs) sp.cache->append(static_cast<int>(sp.rows.size()));
  const auto started = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    const size_t n = static_cast<size_t>(n_rows);
    const int n_embd = c.n_embd;
    Scratch& s = *scratch_;
    float* x = sized(s.x, n * n_embd);
    ThreadPool* pool = pool_.get();

    const int n_rot = c.rope.n_rot;
    float* rope_table = sized(s.rope, n * n_rot);
    const int64_t embed_ns = n_embd / 2 + static_cast<int64_t>(n_rot) * 16;  // row dequantize + 32 ns per sin/cos pair
    for_rows(pool, n_rows, embed_ns, [&](int begin, int end) {
      for (int i = begin; i < end; ++i) {
        weights_->embed(batch.tokens[i], x + static_cast<size_t>(i) * n_embd);
        rope_cos_sin(batch.positions[i], c.rope, rope_table + static_cast<size_t>(i) * n_rot);
      }
    });

    for (int l = 0; l < c.n_layers; ++l) {
      llama_block(weights_->layers[static_cast<size_t>(l)], c, l, plan.seqs, plan.slot, rope_table, n_rows, x, s.block,
                  pool, profile_);
      for (size_t j = 0; j < n_layer_feats && n_feat > 0; ++j) {
        if (features->layers[j] != l) continue;
        for (int r = 0; r < n_feat; ++r) {  // residual stream after block l: (n_feat, layers, n_embd)
          std::memcpy(features->residual.data() + (static_cast<size_t>(r) * n_layer_feats + j) * n_embd,
                      x + static_cast<size_t>(plan.feature_rows[r]) * n_embd, sizeof(float) * n_embd);
        }
      }
    }

    for (int r = 0; r < n_feat; ++r) {
      rmsnorm(x + static_cast<size_t>(plan.feature_rows[r]) * n_embd, weights_->output_norm.data(), n_embd, c.rms_eps,
              features->final.data() + static_cast<size_t>(r) * n_embd);
    }
    if (n_out > 0) {
      float* final_x = sized(s.final_x, static_cast<size_t>(n_out) * n_embd);  // (n_out, n_embd)
      const auto head_started = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      matmul(weights_->output, final_x, n_out, out.data.data(), pool, [&](int r0, int r1) {  // the final norm
        for (int r = r0; r < r1; ++r) {
          rmsnorm(x + static_cast<size_t>(plan.logit_rows[r]) * n_embd, weights_->output_norm.data(), n_embd,
                  c.rms_eps, final_x + static_cast<size_t>(r) * n_embd);
        }
      });
      if (profile_) profile_->ns[ForwardProfile::kOutput] += (std::chrono::steady_clock::now() - head_started).count();
    }
    if (profile_) {
      profile_->total_ns += (std::chrono::steady_clock::now() - started).count();
      ++profile_->forwards;
    }
  } catch (...) {
    for (const SeqPlan& sp : plan.seqs) sp.cache->truncate(sp.n_prefix);
    throw;
  }
}

const char* ForwardProfile::name(int phase) {
  static const char* const kNames[kPhases] = {"norm+qkv",     "rope_kv",     "attention", "wo",
                                               "norm+gate_up", "swiglu+down", "output"};
  return phase >= 0 && phase < kPhases ? kNames[phase] : "?";
}

int64_t ForwardProfile::other_ns() const {
  int64_t phases = 0;
  for (int64_t v : ns) phases += v;
  return total_ns - phases;
}

void Transformer::embed(Token token, float* dst) const {
  if (token < 0 || token >= config_.n_vocab) {
    throw Error("embed: token id " + std::to_string(token) + " outside the vocabulary [0, " +
                std::to_string(config_.n_vocab) + ")");
  }
  weights_->embed(token, dst);
}

const WeightMatrix& Transformer::output_matrix() const { return weights_->output; }

void Transformer::output_head(const float* h, int n_rows, float* logits) {
  if (n_rows > 0) matmul(weights_->output, h, n_rows, logits, pool_.get());
}

}  // namespace specdec
