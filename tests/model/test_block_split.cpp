// block_splits_rows: when llama_block runs each thread's rows through the whole block instead
// of splitting every matmul's outputs (model/llama_block.h). The cases pin the cost model's
// decisions for the shapes BENCHMARKS 56b measured, and the tiny shape the batch-invariance
// tests rely on to reach the row split.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "model/batch_plan.h"
#include "model/llama_block.h"
#include "specdec/dtype.h"

namespace specdec::testing {
namespace {

struct Shape {
  ModelConfig config;
  LayerWeights weights;  // only n_out and row_bytes are set: all the predicate reads
};

WeightMatrix shape_only(DType type, int64_t n_out, int64_t n_in) {
  WeightMatrix w;
  w.type = type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = dtype_row_bytes(type, n_in);
  return w;
}

Shape llama_shape(int n_embd, int n_heads, int n_kv_heads, int n_ff, DType type) {
  Shape s;
  ModelConfig& c = s.config;
  c.n_embd = n_embd;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = n_embd / n_heads;
  c.n_ff = n_ff;
  LayerWeights& w = s.weights;
  w.wq = shape_only(type, c.q_dim(), n_embd);
  w.wk = shape_only(type, c.kv_dim(), n_embd);
  w.wv = shape_only(type, c.kv_dim(), n_embd);
  w.wo = shape_only(type, n_embd, c.q_dim());
  w.w_gate = shape_only(type, n_ff, n_embd);
  w.w_up = shape_only(type, n_ff, n_embd);
  w.w_down = shape_only(type, n_embd, n_ff);
  return s;
}

// One sequence whose rows are the whole batch of n_rows.
std::vector<SeqPlan> one_sequence(int n_rows) {
  std::vector<SeqPlan> seqs(1);
  for (int r = 0; r < n_rows; ++r) seqs[0].rows.push_back(r);
  return seqs;
}

bool splits(const Shape& s, int n_rows, int n_threads) {
  return block_splits_rows(s.weights, s.config, one_sequence(n_rows), n_rows, n_threads);
}

TEST(BlockSplit, CountsTheBlocksActivationsAndWeights) {
  const Shape tiny = llama_shape(64, 4, 2, 96, DType::F32);
  EXPECT_EQ(block_activation_bytes(tiny.config), 4u * (2 * 64 + 2 * 64 + 2 * 32 + 2 * 96));
  EXPECT_EQ(block_weight_bytes(tiny.weights), 4u * (64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 96 * 64 + 64 * 96));
}

TEST(BlockSplit, DecidesByRowsPerThreadAndActivationShare) {
  // The tiny shape of test_batch_invariance.cpp: its 40-row tree and 70-row prefill split.
  for (DType type : {DType::F32, DType::Q8_0, DType::F16}) {
    const Shape tiny = llama_shape(64, 4, 2, 96, type);
    EXPECT_TRUE(splits(tiny, 40, 2)) << dtype_name(type);
    EXPECT_TRUE(splits(tiny, 70, 2)) << dtype_name(type);
    EXPECT_TRUE(splits(tiny, 32, 2)) << dtype_name(type);
    EXPECT_FALSE(splits(tiny, 31, 2)) << dtype_name(type) << ": under 16 rows per thread";
    EXPECT_FALSE(splits(tiny, 70, 1)) << dtype_name(type) << ": one thread";
  }
  // 150M (576 dim, 1,536 ffn) Q8_0: a 64-row prefill splits, a 32-row call does not (its
  // activations are under 0.3 of a second weight pass).
  const Shape small = llama_shape(576, 9, 3, 1536, DType::Q8_0);
  EXPECT_TRUE(splits(small, 64, 2));
  EXPECT_TRUE(splits(small, 256, 2));
  EXPECT_FALSE(splits(small, 32, 2));
  EXPECT_FALSE(splits(small, 9, 2));
  // 1B (2,048 dim, 5,632 ffn) Q8_0: the 256-row prefill chunk splits, a 64-row one does not;
  // on 16 threads (15 extra weight passes) neither does.
  const Shape large = llama_shape(2048, 32, 4, 5632, DType::Q8_0);
  EXPECT_TRUE(splits(large, 256, 2));
  EXPECT_FALSE(splits(large, 64, 2));
  EXPECT_FALSE(splits(large, 256, 16));
}

TEST(BlockSplit, NeedsEachSequencesRowsInOneRun) {
  const Shape tiny = llama_shape(64, 4, 2, 96, DType::Q8_0);
  std::vector<SeqPlan> interleaved(2);
  for (int r = 0; r < 70; ++r) interleaved[static_cast<size_t>(r % 2)].rows.push_back(r);
  EXPECT_FALSE(block_splits_rows(tiny.weights, tiny.config, interleaved, 70, 2));
  std::vector<SeqPlan> runs(3);  // rows 0-29, 30, 31-69: a prefill, a decode row, another prefill
  for (int r = 0; r < 70; ++r) runs[r < 30 ? 0 : r == 30 ? 1 : 2].rows.push_back(r);
  EXPECT_TRUE(block_splits_rows(tiny.weights, tiny.config, runs, 70, 2));
  std::swap(runs[2].rows[5], runs[0].rows[5]);  // one row of each prefill swapped: three runs no more
  EXPECT_FALSE(block_splits_rows(tiny.weights, tiny.config, runs, 70, 2));
}

}  // namespace
}  // namespace specdec::testing
