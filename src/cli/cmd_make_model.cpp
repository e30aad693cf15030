// cli/cmd_make_model.cpp — `specdec make-model --shape S --type T -o OUT.gguf [--seed N]
// [--ctx N] [--pure] [-t THREADS]`: writes a random-weight Llama model of a realistic shape
// (llama-150m, llama-1b, llama-8b, tiny) for benchmarks, quantized with preset T.
// `specdec make-model --noisy-copy-of MODEL.gguf --noise X -o OUT.gguf [--seed N]`: a noisy copy
// of MODEL (a stand-in draft that agrees with it partly).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "specdec/error.h"
#include "specdec/make_model.h"
#include "specdec/thread_pool.h"
#include "cli/progress.h"

namespace specdec::cli {
namespace {

struct MakeModelOptions {
  std::string shape, type = "Q8_0", output;
  std::string noisy_source;
  float noise = 0.1f;
  uint64_t seed = 1;
  int n_ctx = 0;
  bool pure = false;
  int n_threads = 0;
};

void run_noisy_copy(const MakeModelOptions& opt) {
  ThreadPool pool(opt.n_threads);
  const auto start = std::chrono::steady_clock::now();
  const NoisyCopyStats stats = make_noisy_copy(opt.noisy_source, opt.output, opt.noise, opt.seed, &pool, progress_printer());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "%swrote %s: %s with noise %g x row RMS (seed %llu) in %llu of %llu tensors, %.1f MiB, %.1f s\n",
               clear_line(), opt.output.c_str(), opt.noisy_source.c_str(), static_cast<double>(opt.noise),
               static_cast<unsigned long long>(opt.seed), static_cast<unsigned long long>(stats.n_noisy),
               static_cast<unsigned long long>(stats.n_tensors), stats.n_bytes / 1048576.0, seconds);
}

void run_make_model(const MakeModelOptions& opt) {
  if (opt.shape.empty() == opt.noisy_source.empty()) {
    throw Error("make-model needs exactly one of --shape NAME (a random model) or --noisy-copy-of MODEL.gguf");
  }
  if (!opt.noisy_source.empty()) {
    run_noisy_copy(opt);
    return;
  }
  ModelShape shape = model_shape(opt.shape);
  if (opt.n_ctx < 0) throw Error("--ctx " + std::to_string(opt.n_ctx) + " must be positive");
  if (opt.n_ctx > 0) shape.n_ctx = opt.n_ctx;
  const QuantPreset preset = quant_preset(opt.type, opt.pure);
  ThreadPool pool(opt.n_threads);
  const auto start = std::chrono::steady_clock::now();
  const MakeModelStats stats = make_model(
      shape, preset, opt.seed, opt.output, &pool,
      progress_printer());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::map<std::string, int> per_type;
  for (const auto& [name, type] : stats.types) ++per_type[dtype_name(type)];
  std::fprintf(stderr,
               "%swrote %s: shape %s (%d dim, %d layers, %d heads, %d KV heads, %d FFN, vocab %d, "
               "ctx %d), %s, %.1f M parameters, %.1f MiB of weights, %.1f s\n",
               clear_line(), opt.output.c_str(), shape.name.c_str(), shape.n_embd, shape.n_layers,
               shape.n_heads, shape.n_kv_heads, shape.n_ff, shape.n_vocab, shape.n_ctx, preset.name.c_str(),
               stats.n_params / 1e6, stats.n_bytes / 1048576.0, seconds);
  for (const auto& [type, n] : per_type) std::fprintf(stderr, "  %-5s %d tensors\n", type.c_str(), n);
}

void setup_make_model(CLI::App& app) {
  auto opt = std::make_shared<MakeModelOptions>();
  std::string shapes, types;
  for (const auto& n : model_shape_names()) shapes += (shapes.empty() ? "" : ", ") + n;
  for (const auto& n : quant_preset_names()) types += (types.empty() ? "" : ", ") + n;
  CLI::App* cmd = app.add_subcommand("make-model", "Write a random-weight Llama model, or a noisy copy of a model, for benchmarks");
  cmd->add_option("--shape", opt->shape, "model shape: " + shapes);
  cmd->add_option("--noisy-copy-of", opt->noisy_source, "instead of --shape: copy this GGUF with noise added to its weights (a partly right draft)");
  cmd->add_option("--noise", opt->noise, "--noisy-copy-of: noise per row, times the row's RMS (default 0.1)");
  cmd->add_option("--type", opt->type, "weight type or llama.cpp preset (default Q8_0): " + types);
  cmd->add_option("-o,--output", opt->output, "output GGUF file")->required();
  cmd->add_option("--seed", opt->seed, "random seed (default 1)");
  cmd->add_option("--ctx", opt->n_ctx, "llama.context_length (default: the shape's)");
  cmd->add_flag("--pure", opt->pure, "every weight matrix in the base type (no per-tensor upgrades)");
  cmd->add_option("-t,--threads", opt->n_threads, "threads (default: physical cores)");
  cmd->callback([opt]() { run_make_model(*opt); });
}

}  // namespace

SPECDEC_COMMAND("make-model", setup_make_model);

}  // namespace specdec::cli
