// model/llama_block.cpp — one Llama/Qwen2 decoder block over N rows (see llama_block.h).
//
// Two ways to spread a call over the pool's threads, the same bits either way (every step
// computes a row from that row's inputs only):
//   - by outputs (most calls): each matmul splits its output columns over the threads, and the
//     row steps between them (norms, quantization, rope, residual adds) read rows that both
//     threads wrote;
//   - by rows (block_splits_rows: prefill-sized batches, each sequence's rows one run): each
//     thread runs the whole block on its own rows with single-threaded matmuls, meeting the
//     others once per block, after the K/V writes that attention needs. Each thread then
//     reads all the weights, but no activation row moves between threads.
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

size_t block_activation_bytes(const ModelConfig& c) {
  return sizeof(float) * (2 * static_cast<size_t>(c.n_embd) + 2 * static_cast<size_t>(c.q_dim()) +
                          2 * static_cast<size_t>(c.kv_dim()) + 2 * static_cast<size_t>(c.n_ff));
}

size_t block_weight_bytes(const LayerWeights& lw) {
  size_t bytes = 0;
  for (const WeightMatrix* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down})
    bytes += w->row_bytes * static_cast<size_t>(w->n_out);
  return bytes;
}

bool block_splits_rows(const LayerWeights& lw, const ModelConfig& c, std::span<const SeqPlan> seqs, int n_rows,
                       int n_threads) {
  if (n_threads < 2 || n_rows < kMinSplitRowsPerThread * n_threads) return false;
  for (const SeqPlan& sp : seqs) {  // each sequence's rows one contiguous run of the batch
    for (size_t i = 1; i < sp.rows.size(); ++i) {
      if (sp.rows[i] != sp.rows[0] + static_cast<int>(i)) return false;
    }
  }
  const double activations = static_cast<double>(n_rows) * static_cast<double>(block_activation_bytes(c));
  const double extra_weights = static_cast<double>(n_threads - 1) * static_cast<double>(block_weight_bytes(lw));
  return activations >= kSplitRowsActivationShare * extra_weights;
}

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since the last lap to a phase of a ForwardProfile (no-op without one).
struct PhaseClock {
  ForwardProfile* profile = nullptr;
  Clock::time_point mark = profile ? Clock::now() : Clock::time_point{};
  void lap(ForwardProfile::Phase phase) {
    if (profile == nullptr) return;
    const Clock::time_point t = Clock::now();
    profile->ns[phase] += (t - mark).count();
    mark = t;
  }
};

// One call's weights and buffers; the steps run on row ranges [r0, r1) with their matmuls
// on `pool` (nullptr: on the calling thread).
struct BlockCall {
  const LayerWeights& lw;
  const ModelConfig& c;
  int layer;
  std::span<const SeqPlan> seqs;
  std::span<const int> slot;
  const float* rope_table;  // (n_rows, n_rot)
  float* x;                 // (n_rows, n_embd) residual stream, updated in place
  float *xn, *q, *k, *v, *attn, *proj, *gate, *up;  // BlockScratch's buffers

  size_t at(int row, int width) const { return static_cast<size_t>(row) * static_cast<size_t>(width); }

  // xn rows [a0, a1) of the range starting at row `base` = rmsnorm of x's (a matmul prologue).
  auto norm_rows(const std::vector<float>& weight, int base) const {
    return [this, &weight, base](int a0, int a1) {
      for (int i = base + a0; i < base + a1; ++i)
        rmsnorm(x + at(i, c.n_embd), weight.data(), c.n_embd, c.rms_eps, xn + at(i, c.n_embd));
    };
  }

  void qkv(int r0, int r1, ThreadPool* pool) const {
    const MatmulOutput outputs[] = {{&lw.wq, q + at(r0, c.q_dim())}, {&lw.wk, k + at(r0, c.kv_dim())},
                                    {&lw.wv, v + at(r0, c.kv_dim())}};
    matmul_group(outputs, 3, xn + at(r0, c.n_embd), r1 - r0, pool, norm_rows(lw.attn_norm, r0));
  }

  void bias_and_rope(int r0, int r1) const {
    const int q_dim = c.q_dim(), kv_dim = c.kv_dim();
    for (int i = r0; i < r1; ++i) {
      float* qi = q + at(i, q_dim);
      float* ki = k + at(i, kv_dim);
      if (c.qkv_bias) {
        add_inplace(qi, lw.bq.data(), q_dim);
        add_inplace(ki, lw.bk.data(), kv_dim);
        add_inplace(v + at(i, kv_dim), lw.bv.data(), kv_dim);
      }
      const float* cos_sin = rope_table + at(i, c.rope.n_rot);
      rope_apply(qi, c.n_heads, c.head_dim, cos_sin, c.rope);
      rope_apply(ki, c.n_kv_heads, c.head_dim, cos_sin, c.rope);
    }
  }

  // The K/V of the batch rows in [r0, r1) into their caches.
  void write_kv(int r0, int r1) const {
    for (const SeqPlan& sp : seqs) {
      for (int row : sp.rows) {
        if (row < r0 || row >= r1) continue;
        sp.cache->write(layer, slot[static_cast<size_t>(row)], k + at(row, c.kv_dim()), v + at(row, c.kv_dim()));
      }
    }
  }

  // out (r1 - r0, q_dim) <- attention of the queries q_rows (r1 - r0, q_dim): rows [r0, r1) of
  // sequence sp, in its order. Each row's keys are its own (extra_begin rebased to the range),
  // so a range attends as the whole sequence would.
  void attend(const SeqPlan& sp, int r0, int r1, const float* q_rows, float* out, ThreadPool* pool) const {
    const int* extra_begin = sp.extra_begin.data() + r0;
    std::vector<int> rebased;  // (r1 - r0 + 1) for a range after the first row
    if (r0 > 0) {
      rebased.assign(sp.extra_begin.begin() + r0, sp.extra_begin.begin() + r1 + 1);
      for (int& e : rebased) e -= sp.extra_begin[static_cast<size_t>(r0)];
      extra_begin = rebased.data();
    }
    const int* extra_slots = sp.extra_slots.data() + sp.extra_begin[static_cast<size_t>(r0)];
    const AttentionRows rows{r1 - r0, sp.n_visible, extra_begin, extra_slots};
    attention(AttentionShape{c.n_heads, c.n_kv_heads, c.head_dim}, rows, q_rows, sp.cache->layer_k(layer),
              sp.cache->layer_v(layer), sp.cache->type(), sp.cache->slot_stride(), sp.cache->head_stride(), out, pool);
  }

  // Every sequence's attention over all n_rows rows (rows of a sequence gathered when they
  // interleave with another's).
  void attend_all(BlockScratch& s, int n_rows, ThreadPool* pool) const {
    const int q_dim = c.q_dim();
    for (const SeqPlan& sp : seqs) {
      const int m = static_cast<int>(sp.rows.size());
      if (m == n_rows) {  // rows are then exactly 0..N-1 in order
        attend(sp, 0, m, q, attn, pool);
        continue;
      }
      float* gathered = sized(s.seq_q, at(m, q_dim));
      for (int r = 0; r < m; ++r)
        std::memcpy(gathered + at(r, q_dim), q + at(sp.rows[r], q_dim), sizeof(float) * q_dim);
      float* seq_out = sized(s.seq_out, at(m, q_dim));
      attend(sp, 0, m, gathered, seq_out, pool);
      for (int r = 0; r < m; ++r)
        std::memcpy(attn + at(sp.rows[r], q_dim), seq_out + at(r, q_dim), sizeof(float) * q_dim);
    }
  }

  // Rows [r0, r1) from attention output to the block's output: x += wo(attn), then
  // x += down(swiglu(gate(norm(x)), up(norm(x)))).
  void output_and_ffn(int r0, int r1, ThreadPool* pool, PhaseClock& clock) const {
    const int m = r1 - r0, n_embd = c.n_embd, n_ff = c.n_ff;
    float* x_rows = x + at(r0, n_embd);
    float* proj_rows = proj + at(r0, n_embd);
    matmul(lw.wo, attn + at(r0, c.q_dim()), m, proj_rows, pool);
    add_inplace(x_rows, proj_rows, m * n_embd);
    clock.lap(ForwardProfile::kWo);
    const MatmulOutput gate_up[] = {{&lw.w_gate, gate + at(r0, n_ff)}, {&lw.w_up, up + at(r0, n_ff)}};
    matmul_group(gate_up, 2, xn + at(r0, n_embd), m, pool, norm_rows(lw.ffn_norm, r0));
    clock.lap(ForwardProfile::kNormGateUp);
    // swiglu in place (gate rows [a0, a1) become the down projection's input rows); element-wise,
    // and an element's bits do not depend on the span it is computed in.
    float* gate_rows = gate + at(r0, n_ff);
    float* up_rows = up + at(r0, n_ff);
    matmul(lw.w_down, gate_rows, m, proj_rows, pool, [gate_rows, up_rows, n_ff, this](int a0, int a1) {
      swiglu(gate_rows + at(a0, n_ff), up_rows + at(a0, n_ff), (a1 - a0) * n_ff, gate_rows + at(a0, n_ff));
    });
    add_inplace(x_rows, proj_rows, m * n_embd);
    clock.lap(ForwardProfile::kSwigluDown);
  }
};

}  // namespace

void llama_block(const LayerWeights& lw, const ModelConfig& c, int layer, std::span<const SeqPlan> seqs,
                 std::span<const int> slot, const float* rope_table, int n_rows, float* x, BlockScratch& s,
                 ThreadPool* pool, ForwardProfile* profile) {
  const size_t n = static_cast<size_t>(n_rows);
  const BlockCall call{lw, c, layer, seqs, slot, rope_table, x,
                       sized(s.xn, n * c.n_embd), sized(s.q, n * c.q_dim()), sized(s.k, n * c.kv_dim()),
                       sized(s.v, n * c.kv_dim()), sized(s.attn, n * c.q_dim()), sized(s.proj, n * c.n_embd),
                       sized(s.gate, n * c.n_ff), sized(s.up, n * c.n_ff)};
  PhaseClock clock{profile};

  if (pool != nullptr && block_splits_rows(lw, c, seqs, n_rows, pool->size())) {
    // By rows: thread t's part is rows [N t / T, N (t + 1) / T). Two calls: every row's K/V
    // must be in the cache before any row attends. The calling thread's part is timed by
    // phase (its norm+qkv also holds its rope and K/V writes, so rope_kv stays 0); the wait for
    // the other parts goes to the call's last phase.
    const int parts = pool->size();
    const auto first_row = [n_rows, parts](int part) {
      return static_cast<int>(static_cast<int64_t>(n_rows) * part / parts);
    };
    PhaseClock no_clock;
    pool->parallel_for(parts, [&](int part, int thread) {
      const int r0 = first_row(part), r1 = first_row(part + 1);
      call.qkv(r0, r1, nullptr);
      call.bias_and_rope(r0, r1);
      call.write_kv(r0, r1);
      if (thread == 0) clock.lap(ForwardProfile::kNormQkv);
    });
    clock.lap(ForwardProfile::kNormQkv);
    pool->parallel_for(parts, [&](int part, int thread) {
      const int r0 = first_row(part), r1 = first_row(part + 1);
      PhaseClock& part_clock = thread == 0 ? clock : no_clock;
      for (const SeqPlan& sp : seqs) {  // the sequences' runs of rows inside the part
        const int first = sp.rows.front();
        const int begin = std::max(r0, first), end = std::min(r1, first + static_cast<int>(sp.rows.size()));
        if (begin >= end) continue;
        const float* q_rows = call.q + call.at(begin, c.q_dim());
        call.attend(sp, begin - first, end - first, q_rows, call.attn + call.at(begin, c.q_dim()), nullptr);
      }
      part_clock.lap(ForwardProfile::kAttention);
      call.output_and_ffn(r0, r1, nullptr, part_clock);
    });
    clock.lap(ForwardProfile::kSwigluDown);
    return;
  }

  // By outputs. Estimated single-core cost per row in ns (measured, AMD EPYC Zen 4, rows in
  // cache: rope_apply 0.12-0.18 ns per element with AVX2 / AVX-512, 0.7-0.85 ns scalar; a bias
  // add ~0.25 ns). So a 9-row verify's rotations run on the calling thread: handing them to the
  // pool cost more than they do. The norms and swiglu are the prologues of the projections
  // that read their output (matmul's prologue): they run on the call's row tasks.
  const bool simd = active_isa() >= Isa::Avx2;
  const int q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const int64_t rope_ns = (q_dim + kv_dim) * (simd ? 1 : 3) / 6 + (c.qkv_bias ? (q_dim + 2 * kv_dim) / 4 : 0);
  call.qkv(0, n_rows, pool);
  clock.lap(ForwardProfile::kNormQkv);
  for_rows(pool, n_rows, rope_ns, [&](int begin, int end) { call.bias_and_rope(begin, end); });
  call.write_kv(0, n_rows);
  clock.lap(ForwardProfile::kRopeKv);
  call.attend_all(s, n_rows, pool);
  clock.lap(ForwardProfile::kAttention);
  call.output_and_ffn(0, n_rows, pool, clock);
}

}  // namespace specdec
