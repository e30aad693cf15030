// spec/medusa_drafter.cpp — MedusaDrafter: a fixed tree of the heads' top-k candidates.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "specdec/error.h"
#include "specdec/heads_drafter.h"
#include "specdec/timer.h"

namespace specdec {

std::vector<std::vector<int>> MedusaDrafter::default_choices() {
  return {{0}, {0, 0}, {1}, {0, 1}, {0, 0, 0}, {1, 0}, {2}, {0, 2}, {0, 0, 1}, {0, 3}, {3}, {0, 1, 0}, {2, 0},
          {4}, {0, 0, 2}, {0, 4}, {1, 1}, {1, 0, 0}, {0, 0, 0, 0}, {5}, {0, 0, 3}, {0, 5}, {0, 2, 0}, {3, 0},
          {0, 1, 1}, {0, 6}, {6}, {0, 7}, {0, 0, 4}, {4, 0}, {1, 2}, {0, 8}, {7}, {0, 3, 0}, {0, 0, 0, 1},
          {0, 0, 5}, {2, 1}, {0, 0, 6}, {1, 0, 1}, {0, 0, 1, 0}, {2, 0, 0}, {5, 0}, {0, 9}, {0, 1, 2}, {8},
          {0, 4, 0}, {0, 2, 1}, {1, 3}, {0, 0, 7}, {0, 0, 0, 2}, {0, 0, 8}, {1, 1, 0}, {0, 1, 0, 0}, {6, 0},
          {9}, {0, 1, 3}, {0, 0, 0, 3}, {1, 0, 2}, {0, 5, 0}, {3, 1}, {0, 0, 2, 0}, {7, 0}, {1, 4}};
}

MedusaDrafter::MedusaDrafter(Transformer& target, const MedusaHeads& heads, MedusaOptions options)
    : target_(target), heads_(heads), options_(std::move(options)) {
  const bool from_file = options_.choices.empty() && !heads_.tree().empty();
  if (options_.choices.empty()) options_.choices = from_file ? heads_.tree() : default_choices();
  for (size_t i = 0; i < options_.choices.size(); ++i) {
    const std::vector<int>& c = options_.choices[i];
    const bool ranks_ok = !c.empty() && std::all_of(c.begin(), c.end(), [](int r) { return r >= 0; });
    const bool prefix_before =
        c.size() <= 1 || std::find(options_.choices.begin(), options_.choices.begin() + static_cast<std::ptrdiff_t>(i),
                                   std::vector<int>(c.begin(), c.end() - 1)) != options_.choices.begin() + static_cast<std::ptrdiff_t>(i);
    const bool unique = std::find(options_.choices.begin(), options_.choices.begin() + static_cast<std::ptrdiff_t>(i), c) ==
                        options_.choices.begin() + static_cast<std::ptrdiff_t>(i);
    if (!ranks_ok || !prefix_before || !unique) {
      throw Error("Medusa tree (" + (from_file ? heads_.path() : std::string("options")) +
                  ") choice " + std::to_string(i) +
                  " must be a new non-empty list of ranks >= 0 whose prefix is an earlier choice");
    }
  }
}

void MedusaDrafter::set_features(std::span<const float> features, int n_embd) {
  SPECDEC_CHECK(n_embd == heads_.n_embd(), "Medusa: features of width " + std::to_string(n_embd));
  features_ = features;
}

Draft MedusaDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  const double t0 = now_seconds();
  Draft draft;
  const size_t n_embd = static_cast<size_t>(heads_.n_embd());
  const int n = static_cast<int>(context.size());
  if (n < 2 || n_max <= 0 || features_.size() < static_cast<size_t>(n - 1) * n_embd) return draft;
  const int n_heads = heads_.n_heads(), n_vocab = target_.config().n_vocab;
  std::vector<float> hidden(static_cast<size_t>(n_heads) * n_embd);        // (n_heads, n_embd)
  std::vector<float> logits(static_cast<size_t>(n_heads) * n_vocab);       // (n_heads, n_vocab)
  heads_.hidden(features_.data() + static_cast<size_t>(n - 2) * n_embd, hidden.data(), &target_.pool());
  target_.output_head(hidden.data(), n_heads, logits.data());

  // Ranks needed per head, then each head's ids in rank order (ties: lower id).
  std::vector<int> n_ranks(static_cast<size_t>(n_heads), 0);  // (n_heads)
  for (const std::vector<int>& c : options_.choices) {
    for (size_t d = 0; d < c.size() && d < static_cast<size_t>(n_heads); ++d) {
      n_ranks[d] = std::max(n_ranks[d], std::min(c[d] + 1, n_vocab));
    }
  }
  std::vector<std::vector<Token>> ranked(static_cast<size_t>(n_heads));  // (n_heads, n_ranks)
  for (int k = 0; k < n_heads; ++k) {
    const float* row = logits.data() + static_cast<size_t>(k) * n_vocab;
    std::vector<Token>& ids = ranked[static_cast<size_t>(k)];
    ids.resize(static_cast<size_t>(n_vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n_ranks[static_cast<size_t>(k)], ids.end(),
                      [&](Token a, Token b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    ids.resize(static_cast<size_t>(n_ranks[static_cast<size_t>(k)]));
  }

  std::map<std::vector<int>, int> node_of;  // choice -> node index
  const bool bug = options_.bug == PlantedBug::DeterministicAsSampled && !sampling.greedy();
  if (bug) draft.rule = ChildRule::IndependentWithReplacement;
  for (const std::vector<int>& c : options_.choices) {
    if (draft.size() >= n_max) break;
    const size_t depth = c.size();
    if (depth > static_cast<size_t>(n_heads) || c.back() >= n_vocab) continue;
    int parent = -1;
    if (depth > 1) {
      const auto it = node_of.find(std::vector<int>(c.begin(), c.end() - 1));
      if (it == node_of.end()) continue;  // its prefix was unusable
      parent = it->second;
    }
    const Token token = ranked[depth - 1][static_cast<size_t>(c.back())];
    SparseDist q;
    if (bug) {
      std::vector<Token> history(context.begin(), context.end());
      const std::vector<Token> path = path_tokens(draft, parent);
      history.insert(history.end(), path.begin(), path.end());
      q = make_distribution(std::span<const float>(logits.data() + (depth - 1) * n_vocab, static_cast<size_t>(n_vocab)),
                            sampling, history);
      if (q.prob(token) <= 0.0f) continue;  // a "sampled" node must lie in its q's support
    }
    node_of[c] = draft.add(token, parent, std::move(q));
  }
  if (bug && draft.empty()) draft.rule = ChildRule::Deterministic;
  draft_seconds_ += now_seconds() - t0;
  return draft;
}

}  // namespace specdec
