// tests/common/heads_files.h — random Medusa heads and EAGLE layers for a given target, written
// as GGUF files in the layouts of docs/HEADS.md (and deliberately broken variants for the
// loaders' error tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specdec {
class Transformer;
}

namespace specdec::testing {

// What to break in a written file (all default: a valid file).
struct HeadsFileFaults {
  std::string fingerprint;     // non-empty: written instead of the target's fingerprint
  std::string architecture;    // non-empty: written instead of "medusa" / "eagle"
  std::string skip_tensor;     // this tensor is left out
  std::string misshape_tensor; // this tensor's last dimension is halved
  std::string skip_key;        // this metadata key is left out
  bool extra_tensor = false;   // an unknown tensor "extra.weight" is added
  int n_embd_delta = 0;        // <arch>.embedding_length = n_embd + this
};

struct MedusaFileSpec {
  int n_heads = 3;
  int n_blocks = 1;
  uint64_t seed = 1;
  float scale = 1.0f;          // weights uniform in +-scale / sqrt(n_embd), biases +-0.1 scale
  std::string tree;            // non-empty: written as medusa.tree_choices (e.g. "0;1;0,0")
  HeadsFileFaults faults;
};

struct EagleFileSpec {
  int n_heads = 2;
  int n_kv_heads = 1;
  int n_ff = 32;
  int n_ctx = 64;
  uint64_t seed = 1;
  float scale = 1.0f;          // as MedusaFileSpec; norms 1 + small noise
  // EAGLE-3 style fusion (eagle.fuse_layers, eagle.fuse.weight written last, so the other
  // tensors equal those of the same spec without fusion): empty = none.
  std::vector<int32_t> fuse_layers;
  bool fuse_selects_final = false;  // fuse = [0 .. 0 I]: the unfused layer's feature slot
  // eagle.draft_vocab (a reduced draft vocabulary, written as given): empty = none.
  std::vector<int32_t> draft_vocab;
  bool write_empty_draft_vocab = false;  // an empty eagle.draft_vocab (malformed)
  HeadsFileFaults faults;
};

// Writes the file for `target` (its n_embd and fingerprint). Deterministic in the spec.
void write_random_medusa(const std::string& path, const Transformer& target, const MedusaFileSpec& spec);
void write_random_eagle(const std::string& path, const Transformer& target, const EagleFileSpec& spec);

}  // namespace specdec::testing
