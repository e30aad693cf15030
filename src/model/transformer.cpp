// model/transformer.cpp — loading and the batched forward pass of a Llama/Qwen2 decoder.
//
// forward(batch): every layer runs its matmuls once over all N rows (one weight pass), the
// per-row kernels (rmsnorm, bias, RoPE) row by row, and attention once per sequence over that
// sequence's cache. Every step computes a row from that row's inputs only, in a fixed order,
// so a row's logits never depend on the batch around it (see specdec/kernels.h).
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "model/batch_plan.h"
#include "model/weights.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/model.h"
#include "specdec/thread_pool.h"

namespace specdec {

// Activations of one forward, grown to the largest batch seen and reused across calls.
struct Transformer::Scratch {
  std::vector<float> x;        // (N, n_embd) residual stream
  std::vector<float> xn;       // (N, n_embd) normalized residual
  std::vector<float> q;        // (N, q_dim)
  std::vector<float> k;        // (N, kv_dim)
  std::vector<float> v;        // (N, kv_dim)
  std::vector<float> attn;     // (N, q_dim) attention output
  std::vector<float> proj;     // (N, n_embd) attn_output / ffn_down result
  std::vector<float> gate;     // (N, n_ff), then swiglu(gate, up)
  std::vector<float> up;       // (N, n_ff)
  std::vector<float> seq_q;    // (M, q_dim) queries of one sequence when rows interleave
  std::vector<float> seq_out;  // (M, q_dim) their attention output
  std::vector<float> final_x;  // (R, n_embd) normalized rows whose logits are wanted
  std::vector<float> rope;     // (N, n_rot) each row's (cos, sin) pairs, shared by all layers
};

namespace {

float* sized(std::vector<float>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// Runs fn(row_begin, row_end) over [0, n_rows) in chunks on the pool. Per-row work only, so
// the chunking never changes a result.
void for_rows(ThreadPool* pool, int n_rows, const std::function<void(int, int)>& fn) {
  constexpr int kMinRowsPerTask = 4;
  const int n_threads = pool ? pool->size() : 1;
  const int n_tasks = std::min(n_threads, n_rows / kMinRowsPerTask);
  if (n_tasks <= 1) {
    fn(0, n_rows);
    return;
  }
  pool->parallel_for(n_tasks, [&](int task, int) {
    fn(static_cast<int>(static_cast<int64_t>(n_rows) * task / n_tasks),
       static_cast<int>(static_cast<int64_t>(n_rows) * (task + 1) / n_tasks));
  });
}

}  // namespace

Transformer::~Transformer() = default;

std::unique_ptr<Transformer> Transformer::load(const std::string& path, const ModelOptions& options) {
  std::unique_ptr<Transformer> t(new Transformer());
  t->gguf_ = GgufFile::open(path);
  t->config_ = read_model_config(*t->gguf_);
  t->weights_ = Weights::load(*t->gguf_, t->config_);
  t->config_.rope.freq_factors = t->weights_->rope_freqs.empty() ? nullptr : t->weights_->rope_freqs.data();
  t->scratch_ = std::make_unique<Scratch>();
  if (options.n_threads < 0) throw Error("model: thread count " + std::to_string(options.n_threads) + " must be >= 0");
  t->pool_ = std::make_unique<ThreadPool>(options.n_threads);
  return t;
}

size_t Transformer::weight_bytes() const { return weights_->streamed_bytes(); }

KvCache Transformer::new_cache(int n_ctx) const {
  if (n_ctx == 0) n_ctx = config_.n_ctx_train;
  if (n_ctx < 0 || n_ctx > config_.n_ctx_train) {
    throw Error("context length " + std::to_string(n_ctx) + " outside [1, " +
                std::to_string(config_.n_ctx_train) + "] (the model's context length)");
  }
  return KvCache(config_, n_ctx);
}

void Transformer::forward(const Batch& batch, std::span<KvCache* const> caches, Logits& out) {
  const BatchPlan plan = plan_batch(batch, caches, config_);
  const ModelConfig& c = config_;
  const int n_rows = batch.size();
  const int n_out = static_cast<int>(plan.logit_rows.size());
  out.n_vocab = c.n_vocab;
  out.batch_row = plan.logit_rows;
  out.data.resize(static_cast<size_t>(n_out) * c.n_vocab);
  if (n_rows == 0) return;

  for (const SeqPlan& sp : plan.seqs) sp.cache->append(static_cast<int>(sp.rows.size()));
  try {
    const size_t n = static_cast<size_t>(n_rows);
    const int q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_embd = c.n_embd, n_ff = c.n_ff;
    Scratch& s = *scratch_;
    float* x = sized(s.x, n * n_embd);
    float* xn = sized(s.xn, n * n_embd);
    float* q = sized(s.q, n * q_dim);
    float* k = sized(s.k, n * kv_dim);
    float* v = sized(s.v, n * kv_dim);
    float* attn = sized(s.attn, n * q_dim);
    float* proj = sized(s.proj, n * n_embd);
    float* gate = sized(s.gate, n * n_ff);
    float* up = sized(s.up, n * n_ff);
    ThreadPool* pool = pool_.get();
    const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};

    const int n_rot = c.rope.n_rot;
    float* rope_table = sized(s.rope, n * n_rot);
    for_rows(pool, n_rows, [&](int begin, int end) {
      for (int i = begin; i < end; ++i) {
        weights_->embed(batch.tokens[i], x + static_cast<size_t>(i) * n_embd);
        rope_cos_sin(batch.positions[i], c.rope, rope_table + static_cast<size_t>(i) * n_rot);
      }
    });

    for (int l = 0; l < c.n_layers; ++l) {
      const LayerWeights& lw = weights_->layers[static_cast<size_t>(l)];
      for_rows(pool, n_rows, [&](int begin, int end) {
        for (int i = begin; i < end; ++i) {
          rmsnorm(x + static_cast<size_t>(i) * n_embd, lw.attn_norm.data(), n_embd, c.rms_eps,
                  xn + static_cast<size_t>(i) * n_embd);
        }
      });
      matmul(lw.wq, xn, n_rows, q, pool);
      matmul(lw.wk, xn, n_rows, k, pool);
      matmul(lw.wv, xn, n_rows, v, pool);
      for_rows(pool, n_rows, [&](int begin, int end) {
        for (int i = begin; i < end; ++i) {
          float* qi = q + static_cast<size_t>(i) * q_dim;
          float* ki = k + static_cast<size_t>(i) * kv_dim;
          float* vi = v + static_cast<size_t>(i) * kv_dim;
          if (c.qkv_bias) {
            add_inplace(qi, lw.bq.data(), q_dim);
            add_inplace(ki, lw.bk.data(), kv_dim);
            add_inplace(vi, lw.bv.data(), kv_dim);
          }
          const float* cos_sin = rope_table + static_cast<size_t>(i) * n_rot;
          rope_apply(qi, c.n_heads, c.head_dim, cos_sin, c.rope);
          rope_apply(ki, c.n_kv_heads, c.head_dim, cos_sin, c.rope);
          KvCache& cache = *caches[batch.seq[i]];
          std::memcpy(cache.k(l, plan.slot[i]), ki, sizeof(float) * kv_dim);
          std::memcpy(cache.v(l, plan.slot[i]), vi, sizeof(float) * kv_dim);
        }
      });
      for (const SeqPlan& sp : plan.seqs) {
        const int m = static_cast<int>(sp.rows.size());
        const AttentionRows rows{m, sp.n_prefix, sp.extra_begin.data(), sp.extra_slots.data()};
        const bool whole_batch = m == n_rows;  // rows are then exactly 0..N-1 in order
        const float* seq_q = q;
        float* seq_out = attn;
        if (!whole_batch) {
          float* gathered = sized(s.seq_q, static_cast<size_t>(m) * q_dim);
          for (int r = 0; r < m; ++r) {
            std::memcpy(gathered + static_cast<size_t>(r) * q_dim, q + static_cast<size_t>(sp.rows[r]) * q_dim,
                        sizeof(float) * q_dim);
          }
          seq_q = gathered;
          seq_out = sized(s.seq_out, static_cast<size_t>(m) * q_dim);
        }
        attention(shape, rows, seq_q, sp.cache->k(l, 0), sp.cache->v(l, 0), static_cast<size_t>(kv_dim),
                  seq_out, pool);
        if (!whole_batch) {
          for (int r = 0; r < m; ++r) {
            std::memcpy(attn + static_cast<size_t>(sp.rows[r]) * q_dim, seq_out + static_cast<size_t>(r) * q_dim,
                        sizeof(float) * q_dim);
          }
        }
      }
      matmul(lw.wo, attn, n_rows, proj, pool);
      add_inplace(x, proj, n_rows * n_embd);

      for_rows(pool, n_rows, [&](int begin, int end) {
        for (int i = begin; i < end; ++i) {
          rmsnorm(x + static_cast<size_t>(i) * n_embd, lw.ffn_norm.data(), n_embd, c.rms_eps,
                  xn + static_cast<size_t>(i) * n_embd);
        }
      });
      matmul(lw.w_gate, xn, n_rows, gate, pool);
      matmul(lw.w_up, xn, n_rows, up, pool);
      for_rows(pool, n_rows, [&](int begin, int end) {
        const size_t offset = static_cast<size_t>(begin) * n_ff;
        swiglu(gate + offset, up + offset, (end - begin) * n_ff, gate + offset);
      });
      matmul(lw.w_down, gate, n_rows, proj, pool);
      add_inplace(x, proj, n_rows * n_embd);
    }

    if (n_out > 0) {
      float* final_x = sized(s.final_x, static_cast<size_t>(n_out) * n_embd);
      for (int r = 0; r < n_out; ++r) {
        rmsnorm(x + static_cast<size_t>(plan.logit_rows[r]) * n_embd, weights_->output_norm.data(), n_embd,
                c.rms_eps, final_x + static_cast<size_t>(r) * n_embd);
      }
      matmul(weights_->output, final_x, n_out, out.data.data(), pool);
    }
  } catch (...) {
    for (const SeqPlan& sp : plan.seqs) sp.cache->truncate(sp.n_prefix);
    throw;
  }
}

}  // namespace specdec
