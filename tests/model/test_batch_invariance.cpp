// Batch invariance: a row's logits and K/V are bit-identical whether decoded alone, inside a
// prefill/verify batch of any size and at any row, next to another sequence's rows, as a
// token-tree node, after truncate/keep_rows, and with 1 or 2 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "model/model_test_util.h"
#include "specdec/cpu.h"
#include "specdec/model.h"
#include "specdec/rng.h"

namespace specdec::testing {
namespace {

struct InvarianceCase {
  const char* name;
  DType weight_type;
  const char* arch;
  int n_threads;
  DType kv_type = DType::F32;
};

void PrintTo(const InvarianceCase& c, std::ostream* os) { *os << c.name; }

std::string case_name(const ::testing::TestParamInfo<InvarianceCase>& info) { return info.param.name; }

// Index of the first differing float, or -1.
long first_difference(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return static_cast<long>(i);
  }
  return -1;
}

// depth (n) of each tree node inside the batch, from parent (parents before their nodes).
std::vector<int> depths_of(const std::vector<int>& parent) {
  std::vector<int> depth(parent.size());
  for (size_t i = 0; i < parent.size(); ++i) depth[i] = parent[i] < 0 ? 0 : depth[static_cast<size_t>(parent[i])] + 1;
  return depth;
}

// Index of the first differing byte, or -1.
long first_byte_difference(const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<const uint8_t*>(a)[i] != static_cast<const uint8_t*>(b)[i]) return static_cast<long>(i);
  }
  return -1;
}

// K and V of position `pos` of `a` equal those of slot `slot` of `b`, for every layer (any type).
void expect_same_kv(const KvCache& a, int pos, const KvCache& b, int slot, const std::string& what) {
  ASSERT_EQ(a.type(), b.type());
  const int n_kv_heads = static_cast<int>(a.row_bytes() / a.head_bytes());
  for (int l = 0; l < a.n_layers(); ++l) {
    for (int h = 0; h < n_kv_heads; ++h) {
      EXPECT_EQ(first_byte_difference(a.k_head(l, h, pos), b.k_head(l, h, slot), a.head_bytes()), -1)
          << what << ": K, layer " << l << ", kv head " << h;
      EXPECT_EQ(first_byte_difference(a.v_head(l, h, pos), b.v_head(l, h, slot), a.head_bytes()), -1)
          << what << ": V, layer " << l << ", kv head " << h;
    }
  }
}

class BatchInvariance : public ::testing::TestWithParam<InvarianceCase> {
 protected:
  void SetUp() override {
    const InvarianceCase& c = GetParam();
    TinyModelSpec spec;
    spec.n_vocab = 300;
    spec.n_embd = 64;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.n_ff = 96;
    spec.n_ctx = 96;
    spec.seed = 7;
    spec.weight_type = c.weight_type;
    spec.arch = c.arch;
    const std::string path = make_random_llama(std::string("invariance-") + c.name + ".gguf", spec);
    reference_ = Transformer::load(path, ModelOptions{1, c.kv_type});
    model_ = Transformer::load(path, ModelOptions{c.n_threads, c.kv_type});
    rng_ = std::make_unique<Rng>(test_seed(c.name));
  }

  std::vector<Token> random_tokens(int n) {
    std::vector<Token> t(static_cast<size_t>(n));
    for (Token& x : t) x = static_cast<Token>(rng_->below(static_cast<uint64_t>(model_->config().n_vocab)));
    return t;
  }
  int n_vocab() const { return model_->config().n_vocab; }

  // parent (n_nodes) of a random token tree, each parent earlier than its node (-1: a child of
  // the prefix): uniform over the earlier nodes, or (chains) mostly one of the last three nodes,
  // so the tree is deep (depths up to ~20 for 40 nodes).
  std::vector<int> random_parents(int n_nodes, bool chains) {
    std::vector<int> parent(static_cast<size_t>(n_nodes));
    for (int i = 0; i < n_nodes; ++i) {
      if (!chains) {
        parent[i] = static_cast<int>(rng_->below(static_cast<uint64_t>(i + 1))) - 1;  // -1 .. i-1
        continue;
      }
      parent[i] = i == 0 ? -1 : i - 1 - static_cast<int>(rng_->below(static_cast<uint64_t>(std::min(i, 3))));
      if (i > 0 && rng_->below(8) == 0) parent[i] = -1;
    }
    return parent;
  }

  // A random token tree after a random prefix, drawn in that order: the prefix, the nodes'
  // tokens, their parents (random_parents), and the nodes' depths (depths_of).
  struct RandomTree {
    std::vector<Token> prefix, node_tokens;
    std::vector<int> parent, depth;
  };
  RandomTree random_tree(int n_prefix, int n_nodes, bool chains) {
    RandomTree tree{random_tokens(n_prefix), random_tokens(n_nodes), random_parents(n_nodes, chains), {}};
    tree.depth = depths_of(tree.parent);
    return tree;
  }

  // Tree node i (parent[i] < i, -1 for a child of the prefix) was forwarded at batch row
  // row_offset + i, after `prefix`, into `cache` at slot prefix.size() + i: its logits and K/V
  // must equal the reference's decoding its root-to-node path one token at a time.
  void expect_nodes_equal_chains(const std::vector<Token>& prefix, const std::vector<Token>& node_tokens,
                                 const std::vector<int>& parent, const Logits& logits, int row_offset,
                                 const KvCache& cache, const std::string& label) {
    KvCache chain_cache = reference_->new_cache();
    for (size_t i = 0; i < node_tokens.size(); ++i) {
      std::vector<Token> node_path;
      for (int a = static_cast<int>(i); a >= 0; a = parent[static_cast<size_t>(a)])
        node_path.insert(node_path.begin(), node_tokens[static_cast<size_t>(a)]);
      std::vector<Token> path = prefix;
      path.insert(path.end(), node_path.begin(), node_path.end());
      const std::vector<float> chain = decode_one_at_a_time(*reference_, path, &chain_cache);
      const std::string what = label + " node " + std::to_string(i) + " depth " + std::to_string(node_path.size() - 1);
      const float* want = chain.data() + (path.size() - 1) * n_vocab();
      EXPECT_EQ(first_difference(logits.row(row_offset + static_cast<int>(i)), want, static_cast<size_t>(n_vocab())), -1)
          << what;
      expect_same_kv(chain_cache, static_cast<int>(path.size()) - 1, cache, static_cast<int>(prefix.size() + i), what);
    }
  }

  std::unique_ptr<Transformer> reference_;  // 1 thread, single-token decoding
  std::unique_ptr<Transformer> model_;      // the case's thread count, batched
  std::unique_ptr<Rng> rng_;
};

// Two sequences fed in chunks of every size 1..9 at varying offsets, their rows interleaved
// randomly in the same batches, must give the one-at-a-time logits and K/V bit for bit.
TEST_P(BatchInvariance, ChunkedAndMixedSequencesEqualSingleTokenDecoding) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const Isa previous = set_active_isa(isa);
    const int n_tokens = 60;
    const std::vector<Token> seq_a = random_tokens(n_tokens), seq_b = random_tokens(n_tokens);
    KvCache ref_cache_a = reference_->new_cache(), ref_cache_b = reference_->new_cache();
    const std::vector<float> ref_a = decode_one_at_a_time(*reference_, seq_a, &ref_cache_a);
    const std::vector<float> ref_b = decode_one_at_a_time(*reference_, seq_b, &ref_cache_b);

    KvCache cache_a = model_->new_cache(), cache_b = model_->new_cache();
    KvCache* caches[] = {&cache_a, &cache_b};
    const std::vector<Token>* seqs[] = {&seq_a, &seq_b};
    const std::vector<float>* refs[] = {&ref_a, &ref_b};
    int done[2] = {0, 0};
    int chunk_size = 1;
    Batch batch;
    Logits logits;
    while (done[0] < n_tokens || done[1] < n_tokens) {
      // Sequence 0 takes the next size of the 1..9 cycle, sequence 1 a random size 0..4.
      int take[2] = {std::min(chunk_size, n_tokens - done[0]),
                     std::min(static_cast<int>(rng_->below(5)), n_tokens - done[1])};
      chunk_size = chunk_size % 9 + 1;
      batch.clear();
      int added[2] = {0, 0};
      int last_row[2] = {-1, -1};
      while (added[0] < take[0] || added[1] < take[1]) {
        int s = static_cast<int>(rng_->below(2));
        if (added[s] == take[s]) s = 1 - s;
        const int pos = done[s] + added[s];
        batch.add((*seqs[s])[static_cast<size_t>(pos)], pos, last_row[s], s, rng_->below(4) != 0);
        last_row[s] = batch.size() - 1;
        ++added[s];
      }
      model_->forward(batch, caches, logits);
      for (int r = 0; r < logits.n_rows(); ++r) {
        const int row = logits.batch_row[static_cast<size_t>(r)];
        const int s = batch.seq[static_cast<size_t>(row)];
        const int pos = batch.positions[static_cast<size_t>(row)];
        EXPECT_EQ(first_difference(logits.row(r), refs[s]->data() + static_cast<size_t>(pos) * n_vocab(),
                                   static_cast<size_t>(n_vocab())), -1)
            << "seq " << s << " pos " << pos << " at row " << row << " of a batch of " << batch.size();
      }
      done[0] += take[0];
      done[1] += take[1];
    }
    ASSERT_EQ(cache_a.size(), n_tokens);
    ASSERT_EQ(cache_b.size(), n_tokens);
    for (int pos = 0; pos < n_tokens; ++pos) {
      expect_same_kv(ref_cache_a, pos, cache_a, pos, "seq 0 pos " + std::to_string(pos));
      expect_same_kv(ref_cache_b, pos, cache_b, pos, "seq 1 pos " + std::to_string(pos));
    }
    set_active_isa(previous);
  }
}

// One prefill batch of 70 rows (the blocked float products from 32 rows on AVX-512, 64 on AVX2,
// with the rows' shared copy made by the pool's row tasks) equals single-token decoding.
TEST_P(BatchInvariance, OnePrefillOfManyRowsEqualsSingleTokenDecoding) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const Isa previous = set_active_isa(isa);
    const int n_tokens = 70;
    EXPECT_EQ(model_->splits_rows(n_tokens), GetParam().n_threads == 2);  // 2 threads: split by rows
    const std::vector<Token> seq = random_tokens(n_tokens);
    KvCache ref_cache = reference_->new_cache();
    const std::vector<float> ref = decode_one_at_a_time(*reference_, seq, &ref_cache);
    KvCache cache = model_->new_cache();
    KvCache* caches[] = {&cache};
    Batch batch;
    for (int pos = 0; pos < n_tokens; ++pos) batch.add(seq[static_cast<size_t>(pos)], pos, pos - 1, 0, true);
    Logits logits;
    model_->forward(batch, caches, logits);
    ASSERT_EQ(logits.n_rows(), n_tokens);
    for (int r = 0; r < n_tokens; ++r) {
      const int pos = batch.positions[static_cast<size_t>(logits.batch_row[static_cast<size_t>(r)])];
      EXPECT_EQ(first_difference(logits.row(r), ref.data() + static_cast<size_t>(pos) * n_vocab(),
                                 static_cast<size_t>(n_vocab())), -1)
          << "pos " << pos << " of a " << n_tokens << "-row prefill";
    }
    for (int pos = 0; pos < n_tokens; ++pos) expect_same_kv(ref_cache, pos, cache, pos, "pos " + std::to_string(pos));
    set_active_isa(previous);
  }
}

// Random token trees after a committed prefix: every node's logits and K/V equal decoding its
// root-to-node path as a chain.
TEST_P(BatchInvariance, TreeNodesEqualTheirPathDecodedAsChain) {
  const int n_trials = 4;
  for (int trial = 0; trial < n_trials; ++trial) {
    const int n_prefix = 1 + static_cast<int>(rng_->below(20));
    const int n_nodes = 1 + static_cast<int>(rng_->below(14));
    const auto [prefix, node_tokens, parent, depth] = random_tree(n_prefix, n_nodes, /*chains=*/false);
    // Tree batch, after a short unrelated sequence 1 row so rows do not start at 0.
    KvCache cache = model_->new_cache(), other = model_->new_cache();
    KvCache* caches[] = {&cache, &other};
    Batch batch;
    Logits logits;
    for (int i = 0; i < n_prefix; ++i) batch.add(prefix[i], i, i - 1, 0, false);
    model_->forward(batch, caches, logits);
    batch.clear();
    batch.add(node_tokens[0], 0, -1, 1, true);
    const int row_offset = batch.size();
    for (int i = 0; i < n_nodes; ++i) {
      batch.add(node_tokens[i], n_prefix + depth[i], parent[i] < 0 ? -1 : parent[i] + row_offset, 0, true);
    }
    model_->forward(batch, caches, logits);
    ASSERT_EQ(logits.n_rows(), n_nodes + 1);

    expect_nodes_equal_chains(prefix, node_tokens, parent, logits, row_offset, cache, "trial " + std::to_string(trial));
  }
}

// Two sequences with cached prefixes, then one batch of their next rows, each sequence's rows
// one run (a prefill next to another: the server's batches), large enough for llama_block to
// split the rows between 2 threads: a thread's part may end inside one sequence and go on
// into the next. Logits and K/V equal single-token decoding.
TEST_P(BatchInvariance, SequencesInRunsOfOneLargeBatchEqualSingleTokenDecoding) {
  const int n_prefix[2] = {3 + static_cast<int>(rng_->below(10)), 3 + static_cast<int>(rng_->below(10))};
  // Sequence 1 longer than sequence 0, so the second thread's part starts inside its run.
  const int n_new[2] = {10 + static_cast<int>(rng_->below(10)), 30 + static_cast<int>(rng_->below(15))};
  std::vector<Token> tokens[2];
  KvCache caches_owned[2] = {model_->new_cache(), model_->new_cache()};
  KvCache* caches[] = {&caches_owned[0], &caches_owned[1]};
  Batch batch;
  Logits logits;
  for (int s = 0; s < 2; ++s) {
    tokens[s] = random_tokens(n_prefix[s] + n_new[s]);
    for (int i = 0; i < n_prefix[s]; ++i) batch.add(tokens[s][static_cast<size_t>(i)], i, i == 0 ? -1 : batch.size() - 1, s, false);
  }
  model_->forward(batch, caches, logits);
  batch.clear();
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < n_new[s]; ++i) {
      const int pos = n_prefix[s] + i;
      batch.add(tokens[s][static_cast<size_t>(pos)], pos, i == 0 ? -1 : batch.size() - 1, s, true);
    }
  }
  model_->forward(batch, caches, logits);
  ASSERT_EQ(logits.n_rows(), n_new[0] + n_new[1]);
  for (int s = 0; s < 2; ++s) {
    KvCache ref_cache = reference_->new_cache();
    const std::vector<float> ref = decode_one_at_a_time(*reference_, tokens[s], &ref_cache);
    for (int i = 0; i < n_new[s]; ++i) {
      const int pos = n_prefix[s] + i, row = (s == 0 ? 0 : n_new[0]) + i;
      const std::string what = "sequence " + std::to_string(s) + " pos " + std::to_string(pos);
      EXPECT_EQ(first_difference(logits.row(row), ref.data() + static_cast<size_t>(pos) * n_vocab(),
                                 static_cast<size_t>(n_vocab())), -1) << what;
      expect_same_kv(ref_cache, pos, caches_owned[s], pos, what);
    }
  }
}

// A tree of 40 nodes in one sequence after a committed prefix: a batch that llama_block splits
// by rows on 2 threads (each thread's rows attend through their own ancestors, extra slots
// rebased to its range; tests/model/test_block_split.cpp checks the predicate for this shape).
// Every node's logits and K/V equal decoding its root-to-node path as a chain.
TEST_P(BatchInvariance, LargeTreeOfOneSequenceEqualsItsPathsDecodedAsChains) {
  const int n_prefix = 5 + static_cast<int>(rng_->below(10)), n_nodes = 40;
  EXPECT_EQ(model_->splits_rows(n_nodes), GetParam().n_threads == 2);
  const auto [prefix, node_tokens, parent, depth] = random_tree(n_prefix, n_nodes, /*chains=*/true);
  KvCache cache = model_->new_cache();
  KvCache* caches[] = {&cache};
  Batch batch;
  Logits logits;
  for (int i = 0; i < n_prefix; ++i) batch.add(prefix[i], i, i - 1, 0, false);
  model_->forward(batch, caches, logits);
  batch.clear();
  for (int i = 0; i < n_nodes; ++i) batch.add(node_tokens[i], n_prefix + depth[i], parent[i], 0, true);
  model_->forward(batch, caches, logits);
  ASSERT_EQ(logits.n_rows(), n_nodes);
  expect_nodes_equal_chains(prefix, node_tokens, parent, logits, 0, cache, "40-node tree");
}

// After a tree verify, keep_rows on an accepted root-to-leaf path (or truncate after a chain)
// and decode on: logits and cache contents equal a fresh run of the accepted tokens.
TEST_P(BatchInvariance, KeepRowsAndTruncateThenRedecodeEqualFreshRun) {
  const int n_trials = 4;
  for (int trial = 0; trial < n_trials; ++trial) {
    const int n_prefix = 1 + static_cast<int>(rng_->below(16));
    const int n_nodes = 2 + static_cast<int>(rng_->below(10));
    const auto [prefix, node_tokens, parent, depth] = random_tree(n_prefix, n_nodes, /*chains=*/false);
    KvCache cache = model_->new_cache();
    KvCache* caches[] = {&cache};
    Batch batch;
    Logits logits;
    for (int i = 0; i < n_prefix; ++i) batch.add(prefix[i], i, i - 1, 0, false);
    for (int i = 0; i < n_nodes; ++i) batch.add(node_tokens[i], n_prefix + depth[i], parent[i] < 0 ? -1 : parent[i] + n_prefix, 0, false);
    // Prefix and tree in one batch: the tree rows are children of the prefix chain's last row.
    for (int i = 0; i < n_nodes; ++i) {
      if (parent[i] < 0) batch.parent[static_cast<size_t>(n_prefix + i)] = n_prefix - 1;
    }
    model_->forward(batch, caches, logits);

    // Accept the path to a random node.
    const int leaf = static_cast<int>(rng_->below(static_cast<uint64_t>(n_nodes)));
    std::vector<int> kept;
    for (int a = leaf; a >= 0; a = parent[a]) kept.insert(kept.begin(), a);
    cache.keep_rows(n_prefix, kept);
    std::vector<Token> accepted = prefix;
    for (int a : kept) accepted.push_back(node_tokens[a]);
    ASSERT_EQ(cache.size(), static_cast<int>(accepted.size()));

    // Continue with a chain of new tokens, then roll part of it back and decode others.
    const std::vector<Token> more = random_tokens(5), other = random_tokens(3);
    batch.clear();
    for (size_t i = 0; i < more.size(); ++i) {
      batch.add(more[i], static_cast<int>(accepted.size() + i), i == 0 ? -1 : static_cast<int>(i) - 1, 0, false);
    }
    model_->forward(batch, caches, logits);
    const int n_keep_more = static_cast<int>(rng_->below(more.size() + 1));
    cache.truncate(static_cast<int>(accepted.size()) + n_keep_more);
    batch.clear();
    std::vector<Token> final_tokens = accepted;
    final_tokens.insert(final_tokens.end(), more.begin(), more.begin() + n_keep_more);
    for (size_t i = 0; i < other.size(); ++i) {
      batch.add(other[i], static_cast<int>(final_tokens.size() + i), i == 0 ? -1 : static_cast<int>(i) - 1, 0, true);
    }
    model_->forward(batch, caches, logits);
    const int n_before_other = static_cast<int>(final_tokens.size());
    final_tokens.insert(final_tokens.end(), other.begin(), other.end());

    KvCache fresh = reference_->new_cache();
    const std::vector<float> ref = decode_one_at_a_time(*reference_, final_tokens, &fresh);
    ASSERT_EQ(cache.size(), fresh.size());
    for (size_t i = 0; i < other.size(); ++i) {
      EXPECT_EQ(first_difference(logits.row(static_cast<int>(i)),
                                 ref.data() + (n_before_other + i) * n_vocab(), static_cast<size_t>(n_vocab())), -1)
          << "trial " << trial << " row " << i;
    }
    for (int pos = 0; pos < fresh.size(); ++pos) {
      expect_same_kv(fresh, pos, cache, pos, "trial " + std::to_string(trial) + " pos " + std::to_string(pos));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance,
                         ::testing::Values(InvarianceCase{"llama_f32_1thread", DType::F32, "llama", 1},
                                           InvarianceCase{"llama_f32_2threads", DType::F32, "llama", 2},
                                           InvarianceCase{"llama_q8_0_2threads", DType::Q8_0, "llama", 2},
                                           InvarianceCase{"qwen2_f16_2threads", DType::F16, "qwen2", 2},
                                           InvarianceCase{"llama_q8_0_kv_f16_2threads", DType::Q8_0, "llama", 2, DType::F16}),
                         case_name);

}  // namespace
}  // namespace specdec::testing
