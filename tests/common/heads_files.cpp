// tests/common/heads_files.cpp — see heads_files.h.
#include "common/heads_files.h"

#include <cmath>
#include <vector>

#include "specdec/gguf.h"
#include "specdec/heads.h"
#include "specdec/model.h"
#include "specdec/rng.h"

namespace specdec::testing {

namespace {

class FileBuilder {
 public:
  FileBuilder(const HeadsFileFaults& faults, uint64_t seed) : faults_(faults), rng_(seed) {}

  void header(const std::string& arch, const Transformer& target) {
    if (faults_.skip_key != "general.architecture") {
      writer_.set_string("general.architecture", faults_.architecture.empty() ? arch : faults_.architecture);
    }
    if (faults_.skip_key != "specdec.target.fingerprint") {
      writer_.set_string("specdec.target.fingerprint",
                         faults_.fingerprint.empty() ? target_fingerprint(target) : faults_.fingerprint);
    }
    u32(arch + ".embedding_length", static_cast<uint32_t>(target.config().n_embd + faults_.n_embd_delta));
  }
  void u32(const std::string& key, uint32_t value) {
    if (key != faults_.skip_key) writer_.set_u32(key, value);
  }
  void string(const std::string& key, const std::string& value) {
    if (key != faults_.skip_key) writer_.set_string(key, value);
  }
  void f32(const std::string& key, float value) {
    if (key != faults_.skip_key) writer_.set_f32(key, value);
  }
  void i32_array(const std::string& key, const std::vector<int32_t>& values) {
    if (key != faults_.skip_key) writer_.set_i32_array(key, values);
  }
  // A tensor of uniform values in center +- spread, GGUF dims.
  void tensor(const std::string& name, std::vector<int64_t> dims, float center, float spread) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> values(static_cast<size_t>(n));  // (n) in GGUF order
    for (float& v : values) v = center + spread * static_cast<float>(rng_.uniform() * 2.0 - 1.0);
    tensor_values(name, std::move(dims), values);
  }
  // A tensor of the given values (GGUF order; a misshaped one keeps the leading values).
  void tensor_values(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
    if (name == faults_.skip_tensor) return;
    if (name == faults_.misshape_tensor) dims.back() /= 2;
    writer_.add_tensor_f32(name, dims, values.data());
  }
  void write(const std::string& path) {
    if (faults_.extra_tensor) tensor("extra.weight", {4}, 0.0f, 1.0f);
    writer_.write(path);
  }

 private:
  HeadsFileFaults faults_;
  Rng rng_;
  GgufWriter writer_;
};

}  // namespace

void write_random_medusa(const std::string& path, const Transformer& target, const MedusaFileSpec& spec) {
  FileBuilder b(spec.faults, spec.seed);
  const int64_t n_embd = target.config().n_embd;
  b.header("medusa", target);
  b.u32("medusa.head_count", static_cast<uint32_t>(spec.n_heads));
  b.u32("medusa.block_count", static_cast<uint32_t>(spec.n_blocks));
  if (!spec.tree.empty()) b.string("medusa.tree_choices", spec.tree);
  const float w = spec.scale / std::sqrt(static_cast<float>(n_embd));
  for (int k = 0; k < spec.n_heads; ++k) {
    for (int j = 0; j < spec.n_blocks; ++j) {
      const std::string prefix = "medusa." + std::to_string(k) + ".blk." + std::to_string(j) + ".";
      b.tensor(prefix + "weight", {n_embd, n_embd}, 0.0f, w);
      b.tensor(prefix + "bias", {n_embd}, 0.0f, 0.1f * spec.scale);
    }
  }
  b.write(path);
}

void write_random_eagle(const std::string& path, const Transformer& target, const EagleFileSpec& spec) {
  FileBuilder b(spec.faults, spec.seed);
  const int64_t n_embd = target.config().n_embd, n_ff = spec.n_ff;
  const int64_t head_dim = n_embd / spec.n_heads, kv_dim = head_dim * spec.n_kv_heads;
  b.header("eagle", target);
  b.u32("eagle.feed_forward_length", static_cast<uint32_t>(spec.n_ff));
  b.u32("eagle.attention.head_count", static_cast<uint32_t>(spec.n_heads));
  b.u32("eagle.attention.head_count_kv", static_cast<uint32_t>(spec.n_kv_heads));
  b.f32("eagle.attention.layer_norm_rms_epsilon", 1e-5f);
  b.f32("eagle.rope.freq_base", 10000.0f);
  b.u32("eagle.context_length", static_cast<uint32_t>(spec.n_ctx));
  b.u32("eagle.block_count", 1);
  if (!spec.draft_vocab.empty() || spec.write_empty_draft_vocab) b.i32_array("eagle.draft_vocab", spec.draft_vocab);
  const float w_in = spec.scale / std::sqrt(static_cast<float>(n_embd));
  b.tensor("eagle.fc.weight", {2 * n_embd, n_embd}, 0.0f, spec.scale / std::sqrt(static_cast<float>(2 * n_embd)));
  b.tensor("eagle.fc.bias", {n_embd}, 0.0f, 0.1f * spec.scale);
  b.tensor("blk.0.attn_norm.weight", {n_embd}, 1.0f, 0.1f);
  b.tensor("blk.0.attn_q.weight", {n_embd, n_embd}, 0.0f, w_in);
  b.tensor("blk.0.attn_k.weight", {n_embd, kv_dim}, 0.0f, w_in);
  b.tensor("blk.0.attn_v.weight", {n_embd, kv_dim}, 0.0f, w_in);
  b.tensor("blk.0.attn_output.weight", {n_embd, n_embd}, 0.0f, w_in);
  b.tensor("blk.0.ffn_norm.weight", {n_embd}, 1.0f, 0.1f);
  b.tensor("blk.0.ffn_gate.weight", {n_embd, n_ff}, 0.0f, w_in);
  b.tensor("blk.0.ffn_up.weight", {n_embd, n_ff}, 0.0f, w_in);
  b.tensor("blk.0.ffn_down.weight", {n_ff, n_embd}, 0.0f, spec.scale / std::sqrt(static_cast<float>(n_ff)));
  if (!spec.fuse_layers.empty()) {
    const int64_t n_in = (static_cast<int64_t>(spec.fuse_layers.size()) + 1) * n_embd;
    b.i32_array("eagle.fuse_layers", spec.fuse_layers);
    if (spec.fuse_selects_final) {  // row o (output o) is 1 at input k * n_embd + o
      std::vector<float> select(static_cast<size_t>(n_in * n_embd), 0.0f);  // (n_embd, n_in)
      for (int64_t o = 0; o < n_embd; ++o) select[static_cast<size_t>(o * n_in + n_in - n_embd + o)] = 1.0f;
      b.tensor_values("eagle.fuse.weight", {n_in, n_embd}, select);
    } else {
      b.tensor("eagle.fuse.weight", {n_in, n_embd}, 0.0f, spec.scale / std::sqrt(static_cast<float>(n_in)));
    }
  }
  b.write(path);
}

}  // namespace specdec::testing
