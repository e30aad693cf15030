// tests/spec/heads_setup.h — targets with random Medusa heads and EAGLE layers written for them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/heads_files.h"
#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/heads.h"

namespace specdec::testing {

struct HeadsFiles {
  std::string medusa, eagle;
  // EAGLE-3 style: eagle_fused fuses the residual streams of fuse_layers with f_t;
  // eagle_select's fuse matrix selects f_t, its other tensors equal eagle's.
  std::string eagle_fused, eagle_select;
  std::vector<int32_t> fuse_layers;
  // eagle's tensors with a reduced draft vocabulary (eagle.draft_vocab = draft_vocab).
  std::string eagle_vocab;
  std::vector<int32_t> draft_vocab;
};

// Random heads for the model at target_path (written once per name).
inline HeadsFiles heads_for(const std::string& target_path, const std::string& name, uint64_t seed) {
  auto target = load_single_threaded(target_path);
  HeadsFiles f{temp_dir() + "/" + name + "_medusa.gguf", temp_dir() + "/" + name + "_eagle.gguf",
               temp_dir() + "/" + name + "_eagle_fused.gguf", temp_dir() + "/" + name + "_eagle_select.gguf", {},
               temp_dir() + "/" + name + "_eagle_vocab.gguf", {}};
  MedusaFileSpec medusa;
  medusa.n_heads = 4;
  medusa.seed = seed;
  medusa.scale = 2.0f;
  write_random_medusa(f.medusa, *target, medusa);
  EagleFileSpec eagle;
  eagle.seed = seed + 1;
  eagle.n_ff = 64;
  eagle.n_ctx = target->config().n_ctx_train;
  eagle.scale = 2.0f;
  write_random_eagle(f.eagle, *target, eagle);
  // The last block, then the first (not sorted: the file's order is the row order).
  const int n_layers = target->config().n_layers;
  f.fuse_layers = {n_layers - 1};
  if (n_layers > 1) f.fuse_layers.push_back(0);
  EagleFileSpec select = eagle;
  select.fuse_layers = f.fuse_layers;
  select.fuse_selects_final = true;
  write_random_eagle(f.eagle_select, *target, select);
  EagleFileSpec fused = eagle;
  fused.seed = seed + 2;
  fused.fuse_layers = f.fuse_layers;
  write_random_eagle(f.eagle_fused, *target, fused);
  // Two ids in three (0, 2, 3, 5, 6, ..): the other third can never be drafted.
  for (int32_t id = 0; id < target->config().n_vocab; ++id)
    if (id % 3 != 1) f.draft_vocab.push_back(id);
  EagleFileSpec reduced = eagle;
  reduced.draft_vocab = f.draft_vocab;
  write_random_eagle(f.eagle_vocab, *target, reduced);
  return f;
}

inline const HeadsFiles& micro_heads() {
  static const HeadsFiles files = heads_for(micro_trio().target, "micro", 41);
  return files;
}

inline const HeadsFiles& tiny_heads() {
  static const HeadsFiles files = heads_for(tiny_trio().target, "tiny", 43);
  return files;
}

}  // namespace specdec::testing
