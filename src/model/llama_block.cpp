// model/llama_block.cpp — one Llama/Qwen2 decoder block over N rows (see llama_block.h).
#include "model/llama_block.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "specdec/cpu.h"
#include "specdec/model.h"
#include "specdec/thread_pool.h"

namespace specdec {

void resize_discarding(std::vector<float>& buffer, size_t n) {
  if (n > buffer.capacity()) buffer = std::vector<float>();
  buffer.resize(n);
}

float* sized(std::vector<float>& buffer, size_t n) {
  if (buffer.size() < n) resize_discarding(buffer, n);
  return buffer.data();
}

void for_rows(ThreadPool* pool, int n_rows, int64_t row_ns, const std::function<void(int, int)>& fn) {
  const int64_t work = static_cast<int64_t>(n_rows) * row_ns;
  const int n_tasks = pool ? std::min(n_rows, pool->task_count(work, kMinRowTaskNs)) : 1;
  if (n_tasks <= 1) {
    fn(0, n_rows);
    return;
  }
  pool->parallel_for(n_tasks, [&](int task, int) {
    fn(static_cast<int>(static_cast<int64_t>(n_rows) * task / n_tasks),
       static_cast<int>(static_cast<int64_t>(n_rows) * (task + 1) / n_tasks));
  });
}

void llama_block(const LayerWeights& lw, const ModelConfig& c, int layer, std::span<const SeqPlan> seqs,
                 std::span<const int> slot, const float* rope_table, int n_rows, float* x, BlockScratch& s,
                 ThreadPool* pool, ForwardProfile* profile) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point mark = profile ? Clock::now() : Clock::time_point{};
  const auto lap = [&](ForwardProfile::Phase phase) {  // the time since the last lap goes to `phase`
    if (profile == nullptr) return;
    const Clock::time_point t = Clock::now();
    profile->ns[phase] += (t - mark).count();
    mark = t;
  };
  const size_t n = static_cast<size_t>(n_rows);
  const int q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_embd = c.n_embd, n_ff = c.n_ff, n_rot = c.rope.n_rot;
  float* xn = sized(s.xn, n * n_embd);
  float* q = sized(s.q, n * q_dim);
  float* k = sized(s.k, n * kv_dim);
  float* v = sized(s.v, n * kv_dim);
  float* attn = sized(s.attn, n * q_dim);
  float* proj = sized(s.proj, n * n_embd);
  float* gate = sized(s.gate, n * n_ff);
  float* up = sized(s.up, n * n_ff);
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};

  // Estimated single-core cost per row in ns (measured, AMD EPYC Zen 4, rows in cache:
  // rope_apply 0.12-0.18 ns per element with AVX2 / AVX-512, 0.7-0.85 ns scalar; a bias add
  // ~0.25 ns). So a 9-row verify's rotations run on the calling thread: handing them to the
  // pool cost more than they do. The norms and swiglu are the prologues of the projections
  // that read their output (matmul's prologue): they run on the call's row tasks.
  const bool simd = active_isa() >= Isa::Avx2;
  const int64_t rope_ns = (q_dim + kv_dim) * (simd ? 1 : 3) / 6 + (c.qkv_bias ? (q_dim + 2 * kv_dim) / 4 : 0);
  const auto norm_rows = [&](const std::vector<float>& weight) {  // xn rows [r0, r1) = rmsnorm of x's
    return [x, xn, &weight, &c, n_embd](int r0, int r1) {
      for (int i = r0; i < r1; ++i) {
        rmsnorm(x + static_cast<size_t>(i) * n_embd, weight.data(), n_embd, c.rms_eps,
                xn + static_cast<size_t>(i) * n_embd);
      }
    };
  };
  const MatmulOutput qkv[] = {{&lw.wq, q}, {&lw.wk, k}, {&lw.wv, v}};
  matmul_group(qkv, 3, xn, n_rows, pool, norm_rows(lw.attn_norm));
  lap(ForwardProfile::kNormQkv);
  for_rows(pool, n_rows, rope_ns, [&](int begin, int end) {
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
    }
  });
  for (const SeqPlan& sp : seqs) {
    for (int row : sp.rows) {
      sp.cache->write(layer, slot[static_cast<size_t>(row)], k + static_cast<size_t>(row) * kv_dim,
                      v + static_cast<size_t>(row) * kv_dim);
    }
  }
  lap(ForwardProfile::kRopeKv);
  for (const SeqPlan& sp : seqs) {
    const int m = static_cast<int>(sp.rows.size());
    const AttentionRows rows{m, sp.n_visible, sp.extra_begin.data(), sp.extra_slots.data()};
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
    attention(shape, rows, seq_q, sp.cache->layer_k(layer), sp.cache->layer_v(layer), sp.cache->type(),
              sp.cache->slot_stride(), sp.cache->head_stride(), seq_out, pool);
    if (!whole_batch) {
      for (int r = 0; r < m; ++r) {
        std::memcpy(attn + static_cast<size_t>(sp.rows[r]) * q_dim, seq_out + static_cast<size_t>(r) * q_dim,
                    sizeof(float) * q_dim);
      }
    }
  }
  lap(ForwardProfile::kAttention);
  matmul(lw.wo, attn, n_rows, proj, pool);
  add_inplace(x, proj, n_rows * n_embd);
  lap(ForwardProfile::kWo);

  const MatmulOutput gate_up[] = {{&lw.w_gate, gate}, {&lw.w_up, up}};
  matmul_group(gate_up, 2, xn, n_rows, pool, norm_rows(lw.ffn_norm));
  lap(ForwardProfile::kNormGateUp);
  // swiglu in place (gate rows [r0, r1) become the down projection's input rows); element-wise,
  // and an element's bits do not depend on the span it is computed in.
  matmul(lw.w_down, gate, n_rows, proj, pool, [gate, up, n_ff](int r0, int r1) {
    const size_t first = static_cast<size_t>(r0) * n_ff;
    swiglu(gate + first, up + first, (r1 - r0) * n_ff, gate + first);
  });
  add_inplace(x, proj, n_rows * n_embd);
  lap(ForwardProfile::kSwigluDown);
}

}  // namespace specdec
