// model/llama_block.h — one Llama decoder block over N rows (internal to the model layer).
// Shared by Transformer::forward and the EAGLE draft layer (heads_eagle.cpp), so both compute a
// block with the same kernels in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/batch_plan.h"
#include "model/weights.h"

namespace specdec {

class ThreadPool;
struct ForwardProfile;

// Activations of one block call, grown to the largest batch seen and reused across calls.
struct BlockScratch {
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
};

// Sets buffer.size() to n with unspecified contents. When n exceeds the capacity the old
// allocation is freed before the new one is made (a plain resize copies, so a growing buffer
// briefly held both: 8 and 9 rows of 32,000 logits, 2.1 MiB, for one forward).
void resize_discarding(std::vector<float>& buffer, size_t n);

// Grows buffer to at least n floats (contents unspecified) and returns its data.
float* sized(std::vector<float>& buffer, size_t n);

// Runs fn(row_begin, row_end) over [0, n_rows) in chunks on the pool (pool may be nullptr).
// For per-row (or per-element) work only, so the chunking never changes a result. row_ns: the
// estimated cost of one row on one core in nanoseconds; below 2 * kMinRowTaskNs in all (or with
// one row) it runs on the caller. The chunks are a pure function of (n_rows, row_ns, threads).
void for_rows(ThreadPool* pool, int n_rows, int64_t row_ns, const std::function<void(int, int)>& fn);

// for_rows' work floor per task. Cost model: handing a call to a spinning worker costs ~0.5 µs
// (an empty 2-thread parallel_for, measured under load 9) plus a few cache-line transfers of
// the rows; a worker that has gone to sleep costs a futex wake (~5 µs, paid by the caller only
// as a syscall, since the caller starts on the tasks at once). A task of >= 8 µs keeps that
// overhead under ~10% even when the worker sleeps.
constexpr int64_t kMinRowTaskNs = 8000;

// How llama_block spreads a call over the pool (llama_block.cpp): by rows when each thread
// gets at least kMinSplitRowsPerThread rows, each sequence's rows are one contiguous run of the
// batch (a part's attention is then one range per sequence), and the rows' activations are at
// least kSplitRowsActivationShare of the weights the extra threads would read again.
// Cost model: split by outputs, about half of every activation row a step writes is read by
// another thread (~150 ns a cache line when the threads sit on two CCDs, ~30 on one); split by
// rows, each of the T threads reads all the block's weights, (T - 1) extra weight passes (from
// memory, or from a shared L3 when the threads share one and keep pace).
// Measured on a 2-vCPU Zen 4 (BENCHMARKS 56b), time by rows over time by outputs: 150M prefills
// 0.73-0.74 (medians, 64 rows) and 0.72-0.80 (256 rows) with the threads on two CCDs, 1B
// 256-row prefills 0.91-0.95; on one CCD 0.94-1.05. A verify, whose weights are its cost, is
// slower by rows in both placements.
constexpr int kMinSplitRowsPerThread = 16;
constexpr double kSplitRowsActivationShare = 0.3;
// Bytes of one row's activations in a block (BlockScratch's buffers except seq_q / seq_out).
size_t block_activation_bytes(const ModelConfig& c);
// Bytes of the block's seven projection matrices.
size_t block_weight_bytes(const LayerWeights& lw);
// True when a call of n_rows rows over seqs on n_threads threads is split by rows (above).
bool block_splits_rows(const LayerWeights& lw, const ModelConfig& c, std::span<const SeqPlan> seqs, int n_rows,
                       int n_threads);

// x (n_rows, n_embd) <- block `layer` applied in place. rope_table (n_rows, n_rot): each row's
// (cos, sin) pairs. Row i writes its K/V into layer `layer` of the cache of its SeqPlan at
// slot[i] and attends as its SeqPlan says (cache prefix, then extra slots, in that order).
// Every row's result depends on its own inputs and visible K/V only (batch invariant), so
// either split gives the same bits.
// Cost: one pass over the block's weights for all rows (one per thread when split by rows) +
// attention over the visible keys.
// profile (may be null): the block's phase times are added to it (ForwardProfile).
void llama_block(const LayerWeights& lw, const ModelConfig& c, int layer, std::span<const SeqPlan> seqs,
                 std::span<const int> slot, const float* rope_table, int n_rows, float* x, BlockScratch& s,
                 ThreadPool* pool, ForwardProfile* profile = nullptr);

}  // namespace specdec
