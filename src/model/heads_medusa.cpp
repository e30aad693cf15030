// model/heads_medusa.cpp — loading and evaluating Medusa-1 heads (docs/HEADS.md).
#include <algorithm>
#include <cstring>
#include <set>

#include "model/heads_common.h"
#include "model/weights.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/heads.h"

namespace specdec {

struct MedusaHeads::Block {
  WeightMatrix w;             // (n_embd, n_embd) row-major (out, in)
  std::vector<float> bias;    // (n_embd)
};

MedusaHeads::MedusaHeads() = default;
MedusaHeads::~MedusaHeads() = default;

const std::string& MedusaHeads::path() const { return gguf_->path(); }

namespace {

// "0;0,0;1" -> {{0}, {0, 0}, {1}}: choices separated by ';', ranks by ','. Syntax only (the
// drafter checks the prefix order); Error naming the file, the key and the bad choice.
std::vector<std::vector<int>> parse_tree_choices(const std::string& text, const std::string& path) {
  std::vector<std::vector<int>> choices;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string choice = text.substr(start, end - start);
    std::vector<int> ranks;
    size_t pos = 0;
    bool ok = !choice.empty();
    while (ok && pos <= choice.size()) {
      const size_t comma = std::min(choice.find(',', pos), choice.size());
      const std::string rank = choice.substr(pos, comma - pos);
      ok = !rank.empty() && rank.size() <= 6 && rank.find_first_not_of("0123456789") == std::string::npos;
      if (ok) ranks.push_back(std::stoi(rank));
      pos = comma + 1;
    }
    if (!ok) {
      throw Error(path + ": medusa.tree_choices: choice " + std::to_string(choices.size()) + " '" + choice +
                  "' is not a ','-separated list of ranks (format \"0;0,0;1\")");
    }
    choices.push_back(std::move(ranks));
    start = end + 1;
  }
  return choices;
}

}  // namespace

std::unique_ptr<MedusaHeads> MedusaHeads::load(const std::string& path, const Transformer& target) {
  std::unique_ptr<MedusaHeads> heads(new MedusaHeads());
  heads->gguf_ = GgufFile::open(path);
  const GgufFile& g = *heads->gguf_;
  check_heads_header(g, "medusa", target);
  heads->n_heads_ = heads_int(g, "medusa.head_count", 1);
  heads->n_blocks_ = heads_int(g, "medusa.block_count", 1);
  heads->n_embd_ = target.config().n_embd;
  std::set<std::string> expected;
  for (int k = 0; k < heads->n_heads_; ++k) {
    for (int j = 0; j < heads->n_blocks_; ++j) {
      const std::string prefix = "medusa." + std::to_string(k) + ".blk." + std::to_string(j) + ".";
      Block block{matrix(g, prefix + "weight", heads->n_embd_, heads->n_embd_),
                  vector_f32(g, prefix + "bias", heads->n_embd_)};
      heads->blocks_.push_back(std::move(block));
      expected.insert(prefix + "weight");
      expected.insert(prefix + "bias");
    }
  }
  check_no_unknown_tensors(g, expected);
  if (g.has("medusa.tree_choices")) heads->tree_ = parse_tree_choices(g.get_string("medusa.tree_choices"), path);
  return heads;
}

void MedusaHeads::hidden(const float* feature, float* hidden, ThreadPool* pool) const {
  const size_t n = static_cast<size_t>(n_embd_);
  std::vector<float> y(n);            // (n_embd) W h + b, then SiLU of it
  const std::vector<float> ones(n, 1.0f);  // (n_embd) swiglu(y, 1) = SiLU(y)
  for (int k = 0; k < n_heads_; ++k) {
    float* h = hidden + static_cast<size_t>(k) * n;  // (n_embd)
    std::memcpy(h, feature, sizeof(float) * n);
    for (int j = 0; j < n_blocks_; ++j) {
      const Block& b = blocks_[static_cast<size_t>(k * n_blocks_ + j)];
      matmul(b.w, h, 1, y.data(), pool);
      add_inplace(y.data(), b.bias.data(), n_embd_);
      swiglu(y.data(), ones.data(), n_embd_, y.data());
      add_inplace(h, y.data(), n_embd_);
    }
  }
}

}  // namespace specdec
