// spec/eagle_drafter.cpp — EagleDrafter: the EAGLE layer's cache bookkeeping and tree drafting.
#include <algorithm>
#include <string>

#include "spec/tree_expand.h"
#include "specdec/error.h"
#include "specdec/heads_drafter.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

constexpr int kEagleCatchUpRows = 256;                             // rows per catch-up forward
constexpr uint64_t kEagleStream = 0xEA61E5EED0F7EA75ULL;  // drafter Rng = seed ^ this

}  // namespace

EagleDrafter::EagleDrafter(Transformer& target, EagleLayer& layer, const EagleOptions& options)
    : target_(target), layer_(layer), options_(options), cache_(layer.new_cache(options.n_ctx)) {
  if (options_.tree_nodes < 0) throw Error("EAGLE tree_nodes " + std::to_string(options_.tree_nodes) + " must be >= 0");
  if (options_.tree_width < 1 || options_.sampled_tree_width < 1 || options_.tree_depth < 0) {
    throw Error("EAGLE tree width " + std::to_string(options_.tree_width) + ", sampled width " +
                std::to_string(options_.sampled_tree_width) + " and depth " +
                std::to_string(options_.tree_depth) + " must be >= 1, >= 1 and >= 0 (0: the node budget)");
  }
  if (!(options_.tree_rank_temperature > 0.0f))
    throw Error("EAGLE tree rank temperature " + std::to_string(options_.tree_rank_temperature) + " must be > 0");
}

void EagleDrafter::begin(std::span<const Token> prompt) {
  if (prompt.empty()) throw Error("EAGLE drafter: empty prompt");
  seeded_ = false;
  // Entry t depends on x_0..x_{t+1} only (through f_t): keep those the new prompt shares.
  const size_t n_shared = common_prefix_length(cached_, prompt);
  rollback(static_cast<int>(n_shared));
}

void EagleDrafter::catch_up(std::span<const Token> prompt) {
  const size_t width = static_cast<size_t>(layer_.feature_width());
  if (prompt.size() >= 2 && features_.size() >= (prompt.size() - 1) * width &&
      static_cast<int>(prompt.size()) - 1 <= cache_.capacity()) {
    sync(prompt);
  }
}

void EagleDrafter::rollback(int n_tokens) {
  const int n_keep = std::max(0, std::min(cache_.size(), n_tokens - 1));
  cache_.truncate(n_keep);
  cached_.resize(n_keep == 0 ? 0 : static_cast<size_t>(n_keep) + 1);
}

void EagleDrafter::set_features(std::span<const float> features, int row_width) {
  SPECDEC_CHECK(row_width == layer_.feature_width(), "EAGLE: feature rows of width " + std::to_string(row_width) +
                                                         ", the layer reads " + std::to_string(layer_.feature_width()));
  features_ = features;
}

std::vector<float> EagleDrafter::sync(std::span<const Token> context) {
  const int n = static_cast<int>(context.size());
  const size_t n_embd = static_cast<size_t>(layer_.config().n_embd);
  // Keep the shared entries, but always recompute the last one (its output is the root's g).
  const size_t n_shared = common_prefix_length(cached_, context);
  const int n_keep = std::min({cache_.size(), std::max(0, static_cast<int>(n_shared) - 1), n - 2});
  cache_.truncate(n_keep);
  const size_t width = static_cast<size_t>(layer_.feature_width());
  std::vector<float> out;  // (rows, n_embd) outputs of the last chunk
  for (int start = n_keep; start <= n - 2; start += kEagleCatchUpRows) {
    const int end = std::min(n - 1, start + kEagleCatchUpRows);  // entries [start, end)
    batch_.clear();
    for (int t = start; t < end; ++t) batch_.add(context[static_cast<size_t>(t) + 1], t, t == start ? -1 : t - start - 1, 0, false);
    out.resize(static_cast<size_t>(end - start) * n_embd);
    const float* verified = features_.data() + static_cast<size_t>(start) * width;  // (rows, width)
    const float* inputs = verified;  // (rows, n_embd): the feature slot of each entry
    if (!layer_.fuse_layers().empty()) {
      slot_.resize(static_cast<size_t>(end - start) * n_embd);
      layer_.fuse(verified, end - start, slot_.data());
      inputs = slot_.data();
    }
    layer_.forward(batch_, inputs, cache_, out.data());
  }
  cached_.assign(context.begin(), context.end());
  return std::vector<float>(out.end() - static_cast<std::ptrdiff_t>(n_embd), out.end());
}

std::vector<std::vector<float>> EagleDrafter::forward_level(const Draft& draft, const std::vector<int>& nodes,
                                                            int n_committed) {
  const size_t n_embd = static_cast<size_t>(layer_.config().n_embd);
  const int n_vocab = target_.config().n_vocab;
  node_slot_.resize(static_cast<size_t>(draft.size()), -1);
  node_g_.resize(static_cast<size_t>(draft.size()) * n_embd);
  const std::vector<int32_t> depths = node_depths(draft);
  std::vector<float> inputs(nodes.size() * n_embd);   // (rows, n_embd) g of each node's parent
  std::vector<float> out(nodes.size() * n_embd);      // (rows, n_embd) g of each node
  batch_.clear();
  for (size_t r = 0; r < nodes.size(); ++r) {
    const int node = nodes[r];
    const int parent = draft.parent[static_cast<size_t>(node)];
    std::vector<int32_t> ancestors;  // cache slots of the node's ancestors, root first
    for (int a = parent; a >= 0; a = draft.parent[static_cast<size_t>(a)]) {
      SPECDEC_CHECK(node_slot_[static_cast<size_t>(a)] >= 0, "EAGLE tree: ancestor not forwarded");
      ancestors.insert(ancestors.begin(), node_slot_[static_cast<size_t>(a)]);
    }
    const float* parent_g = parent < 0 ? root_g_.data() : node_g_.data() + static_cast<size_t>(parent) * n_embd;
    std::copy(parent_g, parent_g + n_embd, inputs.begin() + static_cast<std::ptrdiff_t>(r * n_embd));
    batch_.add_cached_tree_row(draft.tokens[static_cast<size_t>(node)], n_committed - 1 + depths[static_cast<size_t>(node)],
                               -1, 0, false, n_committed, ancestors);
    node_slot_[static_cast<size_t>(node)] = cache_.size() + static_cast<int>(r);
  }
  layer_.forward(batch_, inputs.data(), cache_, out.data());
  std::vector<float> logits(nodes.size() * static_cast<size_t>(n_vocab));  // (rows, n_vocab)
  layer_.draft_logits(out.data(), static_cast<int>(nodes.size()), logits.data());
  std::vector<std::vector<float>> result;
  for (size_t r = 0; r < nodes.size(); ++r) {
    std::copy(out.begin() + static_cast<std::ptrdiff_t>(r * n_embd), out.begin() + static_cast<std::ptrdiff_t>((r + 1) * n_embd),
              node_g_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(nodes[r]) * n_embd));
    result.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(r * n_vocab),
                        logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * n_vocab));
  }
  return result;
}

Draft EagleDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  if (!seeded_) {
    rng_ = Rng(sampling.seed ^ kEagleStream);
    seeded_ = true;
  }
  const double t0 = now_seconds();
  const int n = static_cast<int>(context.size());
  // Entries 0..n-2 and the forwarded tree nodes (at most tree_width per level below the
  // deepest) must fit in the layer's cache.
  const int room = cache_.capacity() - (n - 1);
  const int width = sampling.greedy() ? options_.tree_width : options_.sampled_tree_width;
  const int depth_cap = options_.tree_depth > 0 ? options_.tree_depth : n_max;
  const int depth = room < 0 ? 0 : std::min(depth_cap, room / width + 1);
  Draft draft;
  if (n < 2 || n_max <= 0 || depth < 1 || features_.size() < static_cast<size_t>(n - 1) * layer_.feature_width()) {
    draft_seconds_ += now_seconds() - t0;
    return draft;
  }
  root_g_ = sync(context);
  std::vector<float> root_logits(static_cast<size_t>(target_.config().n_vocab));  // (n_vocab)
  layer_.draft_logits(root_g_.data(), 1, root_logits.data());
  TreeExpandOptions tree;
  tree.width = width;
  tree.depth = depth;
  tree.budget = options_.tree_nodes > 0 ? options_.tree_nodes : n_max;
  tree.rule = options_.tree_rule;
  tree.rank_temperature = options_.tree_rank_temperature;
  tree.p_min = p_min_;
  tree.bug = options_.bug;
  node_slot_.clear();
  node_g_.clear();
  const int n_committed = n - 1;  // entries in the cache
  try {
    draft = expand_tree(root_logits, context, n_max, sampling, tree, rng_,
                        [&](const Draft& d, const std::vector<int>& nodes) { return forward_level(d, nodes, n_committed); });
  } catch (...) {
    cache_.truncate(n_committed);
    throw;
  }
  cache_.truncate(n_committed);  // tree nodes out: accepted ones come back with true features
  draft_seconds_ += now_seconds() - t0;
  return draft;
}

}  // namespace specdec
