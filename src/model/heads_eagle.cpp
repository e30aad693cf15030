// model/heads_eagle.cpp — loading and running the EAGLE draft layer (docs/HEADS.md).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "model/batch_plan.h"
#include "model/heads_common.h"
#include "model/llama_block.h"
#include "model/weights.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/heads.h"

namespace specdec {

struct EagleLayer::Weights {
  WeightMatrix fuse;             // (n_embd, (k + 1) * n_embd) or empty: EAGLE-3 style fusion
  WeightMatrix fc;               // (n_embd, 2 * n_embd): input = concat(embedding, feature)
  std::vector<float> fc_bias;    // (n_embd)
  LayerWeights block;            // blk.0.*
  BlockScratch scratch;          // activations, reused across calls
  std::vector<float> fc_in;      // (N, 2 * n_embd)
  std::vector<float> rope;       // (N, n_rot)
  // Reduced draft vocabulary: the target output matrix's rows of the draft ids, copied.
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> draft_head_bytes;  // (n_draft, row_bytes), 64-byte aligned
  WeightMatrix draft_head;                // (n_draft, n_embd) over draft_head_bytes
  std::vector<float> draft_scores;        // (N, n_draft)
};

EagleLayer::EagleLayer(Transformer& target) : target_(target) {}
EagleLayer::~EagleLayer() = default;

const std::string& EagleLayer::path() const { return gguf_->path(); }

// eagle.draft_vocab: ascending ids in [0, n_vocab), at least one; copies their output rows.
void EagleLayer::load_draft_vocab(EagleLayer& layer, Weights& w) {
  const std::string& path = layer.gguf_->path();
  const std::vector<int32_t> ids = layer.gguf_->get_i32_array("eagle.draft_vocab");
  const int n_vocab = layer.config_.n_vocab;
  if (ids.empty()) throw Error(path + ": eagle.draft_vocab is empty (omit the key for the whole vocabulary)");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab || (i > 0 && ids[i] <= ids[i - 1])) {
      throw Error(path + ": eagle.draft_vocab holds " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                  ": expected ascending, distinct token ids in [0, " + std::to_string(n_vocab) + ")");
    }
  }
  layer.draft_vocab_.assign(ids.begin(), ids.end());
  const WeightMatrix& output = layer.target_.output_matrix();
  const size_t n_bytes = (ids.size() * output.row_bytes + 63) / 64 * 64;
  w.draft_head_bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, n_bytes)));
  if (!w.draft_head_bytes) throw Error(path + ": out of memory for the draft vocabulary's " + std::to_string(n_bytes) + " bytes");
  for (size_t i = 0; i < ids.size(); ++i) {
    copy_weight_row(output, ids[i], w.draft_head_bytes.get() + i * output.row_bytes);  // any layout
  }
  w.draft_head = output;
  w.draft_head.data = w.draft_head_bytes.get();
  w.draft_head.layout = WeightLayout::RowMajor;
  w.draft_head.n_out = static_cast<int64_t>(ids.size());
}

std::unique_ptr<EagleLayer> EagleLayer::load(const std::string& path, Transformer& target) {
  std::unique_ptr<EagleLayer> layer(new EagleLayer(target));
  layer->gguf_ = GgufFile::open(path);
  const GgufFile& g = *layer->gguf_;
  check_heads_header(g, "eagle", target);
  const int n_blocks = heads_int(g, "eagle.block_count", 1);
  if (n_blocks != 1) throw Error(path + ": eagle.block_count = " + std::to_string(n_blocks) + ", only 1 is supported");
  ModelConfig& c = layer->config_;
  c.arch = "eagle";
  c.n_vocab = target.config().n_vocab;
  c.n_embd = target.config().n_embd;
  c.n_layers = 1;
  c.n_ff = heads_int(g, "eagle.feed_forward_length", 1);
  c.n_heads = heads_int(g, "eagle.attention.head_count", 1);
  c.n_kv_heads = heads_int(g, "eagle.attention.head_count_kv", 1);
  c.n_ctx_train = heads_int(g, "eagle.context_length", 1);
  if (c.n_embd % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 || (c.n_embd / c.n_heads) % 2 != 0) {
    throw Error(path + ": eagle.attention.head_count " + std::to_string(c.n_heads) + " / head_count_kv " +
                std::to_string(c.n_kv_heads) + " do not split n_embd " + std::to_string(c.n_embd) +
                " into even-sized heads shared by groups");
  }
  c.head_dim = c.n_embd / c.n_heads;
  c.rms_eps = g.get_f32("eagle.attention.layer_norm_rms_epsilon");
  c.rope.freq_base = g.get_f32("eagle.rope.freq_base");
  if (!(c.rms_eps > 0.0f) || !(c.rope.freq_base > 0.0f)) {
    throw Error(path + ": eagle rms epsilon " + std::to_string(c.rms_eps) + " and rope.freq_base " +
                std::to_string(c.rope.freq_base) + " must be positive");
  }
  c.rope.n_rot = c.head_dim;
  c.rope.layout = RopeLayout::Norm;
  auto w = std::make_unique<Weights>();
  w->fc = matrix(g, "eagle.fc.weight", 2 * static_cast<int64_t>(c.n_embd), c.n_embd);
  w->fc_bias = vector_f32(g, "eagle.fc.bias", c.n_embd);
  w->block = load_layer_weights(g, c, "blk.0.");
  std::set<std::string> expected = {"eagle.fc.weight", "eagle.fc.bias"};
  if (g.has("eagle.fuse_layers")) {
    layer->fuse_layers_ = g.get_i32_array("eagle.fuse_layers");
    const int n_target_layers = target.config().n_layers;
    std::set<int32_t> distinct;
    for (int32_t l : layer->fuse_layers_) {
      if (l < 0 || l >= n_target_layers || !distinct.insert(l).second) {
        throw Error(path + ": eagle.fuse_layers holds " + std::to_string(l) + ": expected distinct blocks of the target in [0, " +
                    std::to_string(n_target_layers) + ")");
      }
    }
    if (layer->fuse_layers_.empty()) throw Error(path + ": eagle.fuse_layers is empty (omit the key for no fusion)");
    w->fuse = matrix(g, "eagle.fuse.weight", static_cast<int64_t>(layer->feature_width()), c.n_embd);
    expected.insert("eagle.fuse.weight");
  }
  if (g.has("eagle.draft_vocab")) load_draft_vocab(*layer, *w);
  for (const char* name : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                           "ffn_down"}) {
    expected.insert(std::string("blk.0.") + name + ".weight");
  }
  check_no_unknown_tensors(g, expected);
  layer->weights_ = std::move(w);
  return layer;
}

void EagleLayer::fuse(const float* verified, int n_rows, float* out) {
  const size_t n_embd = static_cast<size_t>(config_.n_embd);
  if (fuse_layers_.empty()) {
    std::memcpy(out, verified, sizeof(float) * n_embd * static_cast<size_t>(n_rows));
    return;
  }
  if (n_rows > 0) matmul(weights_->fuse, verified, n_rows, out, &target_.pool());
}

void EagleLayer::draft_logits(const float* g, int n_rows, float* logits) {
  if (n_rows <= 0) return;
  if (draft_vocab_.empty()) {
    target_.output_head(g, n_rows, logits);
    return;
  }
  const size_t n_vocab = static_cast<size_t>(config_.n_vocab), n_draft = draft_vocab_.size();
  float* scores = sized(weights_->draft_scores, static_cast<size_t>(n_rows) * n_draft);
  matmul(weights_->draft_head, g, n_rows, scores, &target_.pool());
  std::fill(logits, logits + static_cast<size_t>(n_rows) * n_vocab, -std::numeric_limits<float>::infinity());
  for (size_t r = 0; r < static_cast<size_t>(n_rows); ++r) {
    for (size_t i = 0; i < n_draft; ++i) logits[r * n_vocab + static_cast<size_t>(draft_vocab_[i])] = scores[r * n_draft + i];
  }
}

KvCache EagleLayer::new_cache(int n_ctx) const {
  if (n_ctx == 0) n_ctx = config_.n_ctx_train;
  if (n_ctx < 0 || n_ctx > config_.n_ctx_train) {
    throw Error("EAGLE layer " + path() + ": context length " + std::to_string(n_ctx) + " outside [1, " +
                std::to_string(config_.n_ctx_train) + "]");
  }
  return KvCache(config_, n_ctx);
}

void EagleLayer::forward(const Batch& batch, const float* inputs, KvCache& cache, float* out) {
  KvCache* caches[] = {&cache};
  const BatchPlan plan = plan_batch(batch, caches, config_);
  const int n_rows = batch.size();
  if (n_rows == 0) return;
  const int n_embd = config_.n_embd, n_rot = config_.rope.n_rot;
  const size_t n = static_cast<size_t>(n_rows);
  Weights& w = *weights_;
  ThreadPool* pool = &target_.pool();
  float* fc_in = sized(w.fc_in, n * 2 * n_embd);
  float* rope_table = sized(w.rope, n * n_rot);
  for (int i = 0; i < n_rows; ++i) {
    float* row = fc_in + static_cast<size_t>(i) * 2 * n_embd;  // (2 * n_embd) [E[x_{t+1}], f_t]
    target_.embed(batch.tokens[i], row);
    std::memcpy(row + n_embd, inputs + static_cast<size_t>(i) * n_embd, sizeof(float) * n_embd);
    rope_cos_sin(batch.positions[i], config_.rope, rope_table + static_cast<size_t>(i) * n_rot);
  }
  matmul(w.fc, fc_in, n_rows, out, pool);
  for (int i = 0; i < n_rows; ++i) add_inplace(out + static_cast<size_t>(i) * n_embd, w.fc_bias.data(), n_embd);
  cache.append(n_rows);
  try {
    llama_block(w.block, config_, 0, plan.seqs, plan.slot, rope_table, n_rows, out, w.scratch, pool);
  } catch (...) {
    cache.truncate(plan.seqs.front().n_prefix);
    throw;
  }
}

}  // namespace specdec
