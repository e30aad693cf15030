// tests/spec/heads_setup.h — targets with random Medusa heads and EAGLE layers written for them.
#pragma once

#include <memory>
#include <string>

#include "common/heads_files.h"
#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/heads.h"

namespace specdec::testing {

struct HeadsFiles {
  std::string medusa, eagle;
};

// Random heads for the model at target_path (written once per name).
inline HeadsFiles heads_for(const std::string& target_path, const std::string& name, uint64_t seed) {
  auto target = load_single_threaded(target_path);
  HeadsFiles f{temp_dir() + "/" + name + "_medusa.gguf", temp_dir() + "/" + name + "_eagle.gguf"};
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
