// cli/cmd_quantize.cpp — `specdec quantize IN.gguf OUT.gguf TYPE [--pure] [-t THREADS]`:
// writes OUT with every 2-D weight converted per llama.cpp's preset TYPE (Q4_K_M, Q8_0, ...;
// see quant_preset_names()), metadata copied, norms kept F32. --pure puts every weight matrix
// in the preset's base type (llama.cpp --pure). Prints a per-type summary to stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "specdec/make_model.h"
#include "specdec/thread_pool.h"
#include "cli/progress.h"

namespace specdec::cli {
namespace {

struct QuantizeOptions {
  std::string input, output, type;
  bool pure = false;
  int n_threads = 0;
};

void run_quantize(const QuantizeOptions& opt) {
  const QuantPreset preset = quant_preset(opt.type, opt.pure);
  ThreadPool pool(opt.n_threads);
  const auto start = std::chrono::steady_clock::now();
  const QuantizeModelStats stats = quantize_model(
      opt.input, opt.output, preset, &pool, progress_printer());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::map<std::string, int> per_type;
  for (const auto& [name, type] : stats.types) ++per_type[dtype_name(type)];
  std::fprintf(stderr,
               "%squantized %s -> %s as %s%s: %llu tensors (%llu converted), %.1f MiB -> %.1f MiB "
               "in %.1f s\n",
               clear_line(), opt.input.c_str(), opt.output.c_str(), preset.name.c_str(),
               preset.pure ? " (pure)" : "",
               static_cast<unsigned long long>(stats.n_tensors),
               static_cast<unsigned long long>(stats.n_quantized), stats.bytes_in / 1048576.0,
               stats.bytes_out / 1048576.0, seconds);
  for (const auto& [type, n] : per_type) std::fprintf(stderr, "  %-5s %d tensors\n", type.c_str(), n);
}

void setup_quantize(CLI::App& app) {
  auto opt = std::make_shared<QuantizeOptions>();
  std::string types;
  for (const auto& n : quant_preset_names()) types += (types.empty() ? "" : ", ") + n;
  CLI::App* cmd = app.add_subcommand("quantize", "Convert a GGUF model's weights to another type");
  cmd->add_option("input", opt->input, "input GGUF file")->required();
  cmd->add_option("output", opt->output, "output GGUF file")->required();
  cmd->add_option("type", opt->type, "weight type or llama.cpp preset: " + types)->required();
  cmd->add_flag("--pure", opt->pure, "every weight matrix in the base type (no per-tensor upgrades)");
  cmd->add_option("-t,--threads", opt->n_threads, "threads (default: physical cores)");
  cmd->callback([opt]() { run_quantize(*opt); });
}

}  // namespace

SPECDEC_COMMAND("quantize", setup_quantize);

}  // namespace specdec::cli
