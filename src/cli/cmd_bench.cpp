// cli/cmd_bench.cpp — `specdec bench -m MODEL [-md DRAFT] [--spec ...] [-t N] [--reps R]
// [--ctx-long 4096] [--simulate-alpha A ...] [--simulate-tree A0,A1,..] [--compare-chain]
// [--plot FILE.svg] [--json FILE] [--prompts FILE]`:
// decode speed vs measured read bandwidth, verify cost curves c(M), prefill, memory, end-to-end
// plain vs speculative (with a drafter), and a labelled SIMULATION. Report on stdout, progress
// on stderr.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "specdec/bench.h"
#include "specdec/error.h"

namespace specdec::cli {
namespace {

struct BenchArgs {
  EngineCliOptions engine;
  SamplingCliOptions sampling;
  BenchOptions bench;
  double min_rep_ms = 50;
  size_t bandwidth_mib = 1024;
  std::string prompts_file, plot_file, json_file;
  std::vector<std::string> tree_profiles;  // "0.6,0.2,0.1" each
  bool quiet = false;
};

// "a0,a1,..." -> {a0, a1, ...}; Error naming the text otherwise.
std::vector<double> parse_profile(const std::string& text) {
  std::vector<double> profile;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw Error("--simulate-tree '" + text + "': '" + item + "' is not a number (expected e.g. 0.6,0.2,0.1)");
    profile.push_back(value);
    start = comma + 1;
  }
  return profile;
}

// One prompt per non-empty line; a line that starts with '"' is a JSON string, so prompts
// with newlines (source code) fit on one line. A malformed JSON line is an Error naming it.
std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read prompts file '" + path + "'");
  std::vector<std::string> prompts;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.front() != '"') {
      prompts.push_back(line);
      continue;
    }
    const auto value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!value.is_string()) {
      throw Error("prompts file '" + path + "' line " + std::to_string(line_number) +
                  ": starts with '\"' but is not one JSON string");
    }
    prompts.push_back(value.get<std::string>());
  }
  if (prompts.empty()) throw Error("prompts file '" + path + "' has no non-empty line");
  return prompts;
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << content) || !out.flush()) throw Error("cannot write '" + path + "'");
}

void run_bench_command(BenchArgs& args) {
  BenchOptions options = args.bench;
  options.engine = args.engine.to_engine_options();
  options.sampling = args.sampling.to_params();
  options.end_to_end = !args.engine.draft.empty() || (args.engine.spec != "auto" && args.engine.spec != "none");
  if (args.min_rep_ms < 0) throw Error("--min-rep-ms " + std::to_string(args.min_rep_ms) + " must be >= 0");
  options.min_rep_seconds = args.min_rep_ms / 1e3;
  options.bandwidth_bytes = args.bandwidth_mib << 20;
  if (!args.prompts_file.empty()) options.prompts = read_prompts(args.prompts_file);
  for (const std::string& text : args.tree_profiles) options.simulate_tree_profiles.push_back(parse_profile(text));
  BenchLog log;
  if (!args.quiet) log = [](const std::string& message) { std::fprintf(stderr, "bench: %s\n", message.c_str()); };

  const BenchReport report = run_bench(options, log);
  const std::string text = bench_report_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!args.json_file.empty()) write_file(args.json_file, bench_report_json(report));
  if (!args.plot_file.empty()) write_file(args.plot_file, bench_report_svg(report));
}

void setup_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  args->sampling.params.temperature = 0.0f;  // greedy by default: outputs comparable with plain
  CLI::App* cmd = app.add_subcommand("bench", "benchmark decode, verify cost c(M), prefill, memory and speculation");
  args->engine.add_to(cmd);
  args->sampling.add_to(cmd);
  BenchOptions& b = args->bench;
  cmd->add_option("--reps", b.reps, "repeats per timing; medians are reported")->check(integer_at_least(1));
  cmd->add_option("--min-rep-ms", args->min_rep_ms, "a repeat loops its forward for at least this long (ms)");
  cmd->add_option("--ctx-short", b.short_ctx, "cache positions before the timed rows at the short context")
      ->check(integer_at_least(1));
  cmd->add_option("--ctx-long", b.long_ctx, "the long context (capped by the model's context)");
  cmd->add_option("--m-max", b.m_max, "largest row count M of the cost curve")->check(CLI::Range(2, 64));
  cmd->add_option("--prefill-chunk", b.prefill_chunk, "tokens per prefill forward")->check(integer_at_least(1));
  cmd->add_option("--bw-mib", args->bandwidth_mib, "read-bandwidth probe size in MiB (0: skip)");
  cmd->add_option("--bw-passes", b.bandwidth_passes, "read-bandwidth probe passes (best is kept)")
      ->check(integer_at_least(1));
  cmd->add_option("--prompts", args->prompts_file, "end to end: prompts file, one per line; a line starting with \" is a JSON string (newlines) (default: built-in)");
  cmd->add_option("-n,--n-predict", b.max_tokens, "end to end: tokens per request")->check(integer_at_least(1));
  cmd->add_option("--simulate-alpha", b.simulate_alpha, "SIMULATION at these acceptance rates (repeatable)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--simulate-c-draft", b.simulate_c_draft,
                  "SIMULATION: draft cost per token / target 1-row forward (default: measured, 0 model-free)");
  cmd->add_option("--simulate-k-max", b.simulate_k_max, "SIMULATION: largest K")->check(integer_at_least(1));
  cmd->add_option("--simulate-loop", b.simulate_loop_tokens,
                  "SIMULATION: also run the decode loop with forced acceptance for N tokens per (alpha, K)");
  cmd->add_option("--simulate-tree", args->tree_profiles,
                  "SIMULATION: chain vs token tree at equal node budget for this per-rank acceptance profile "
                  "alpha_0,alpha_1,... (P that a node's r-th best child is the accepted one; repeatable)");
  cmd->add_option("--simulate-tree-nodes", b.simulate_tree_nodes, "SIMULATION: tree node budgets (default 8 16)")
      ->check(integer_at_least(1));
  cmd->add_flag("--profile", b.profile,
                "also time each phase of a forward (norms, projections, attention, FFN, output) for M = 1, 5, 9 and the prefill chunk");
  cmd->add_flag("--compare-chain", b.compare_chain,
                "end to end with --spec tree / --tree-nodes: also the same drafter as a chain of the same budget");
  cmd->add_option("--plot", args->plot_file, "write an SVG with c(M) and speedup-vs-K curves");
  cmd->add_option("--json", args->json_file, "write every figure as JSON");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress messages on stderr");
  cmd->callback([args] { run_bench_command(*args); });
}

}  // namespace

SPECDEC_COMMAND("bench", setup_bench);

}  // namespace specdec::cli
