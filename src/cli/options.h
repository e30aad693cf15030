// cli/options.h — command-line options shared by generate, bench and serve.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "specdec/engine.h"
#include "specdec/sampling.h"

namespace specdec::cli {

struct EngineCliOptions {
  std::string model, draft, spec = "auto", lookup_cache, heads;
  int draft_max = 8, draft_min = 0;
  float draft_p_min = 0.0f, lenience = 1.0f;
  bool no_adaptive = false;
  int lookup_min = 2, lookup_max = 4, ngram_order = 4;
  int tree_nodes = 0, tree_width = 0, tree_depth = 0;
  float tree_rank_temperature = 0.0f;
  int n_ctx = 0, n_threads = 0;
  std::string kv_type = "f32";
  bool no_repack = false;

  // -m, -md, --spec, --draft-max, --draft-min, --draft-p-min, --no-adaptive, --lenience,
  // --lookup-min, --lookup-max, --ngram-order, --lookup-cache, --tree-*, -c, -t.
  void add_to(CLI::App* cmd, bool model_required = true);
  // Throws Error naming an invalid value.
  EngineOptions to_engine_options() const;
};

// A CLI11 check that the value is an integer >= min_value. Its message names the value and
// the bound ("must be an integer >= 1, got '0'"), where CLI11's PositiveNumber printed a range
// up to 1.8e308 and said the same for text that is not a number.
CLI::Validator integer_at_least(long long min_value);

struct SamplingCliOptions {
  SamplingParams params;
  void add_to(CLI::App* cmd);
  SamplingParams to_params() const;
};

// main() of both programs (specdec, specdec-server): rewrites llama.cpp's `-md` to
// --model-draft (CLI11 allows one-letter short options only), parses argv[1..] into app (whose
// callbacks run the command) and returns the exit status: CLI11's for parse errors and --help,
// 1 for specdec::Error (user and I/O errors, printed), 2 for any other exception.
int parse_and_run(CLI::App& app, int argc, char** argv);

}  // namespace specdec::cli
