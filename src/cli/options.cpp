#include "cli/options.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "specdec/error.h"

namespace specdec::cli {

void EngineCliOptions::add_to(CLI::App* cmd, bool model_required) {
  auto* m = cmd->add_option("-m,--model", model, "target model (GGUF)");
  if (model_required) m->required();
  cmd->add_option("--model-draft,--md", draft, "draft model (GGUF) for speculative decoding");
  cmd->add_option("--spec", spec, "speculation: auto|none|draft|ngram|lookup|hybrid|tree|medusa|eagle (auto: draft with -md, else lookup; tree: token trees, from the draft model with -md, else from prompt lookup; medusa/eagle: self-speculation heads, --heads)");
  cmd->add_option("--heads", heads, "Medusa heads or EAGLE layer (GGUF, docs/HEADS.md) trained for the target, for --spec medusa|eagle");
  cmd->add_option("--draft-max", draft_max, "most draft tokens per step (K upper bound; tree node budget)");
  cmd->add_option("--draft-min", draft_min, "fewest draft tokens per step (adaptive K lower bound)");
  cmd->add_option("--draft-p-min", draft_p_min, "stop drafting when the draft's top probability is below this");
  cmd->add_flag("--no-adaptive", no_adaptive, "fixed K = --draft-max instead of the adaptive choice");
  cmd->add_option("--lenience", lenience, "LOSSY opt-in (Leviathan et al. A.5): accept more, in (0, 1]; 1 = exact");
  cmd->add_option("--lookup-min", lookup_min, "prompt lookup: shortest n-gram to match");
  cmd->add_option("--lookup-max", lookup_max, "prompt lookup: longest n-gram to match");
  cmd->add_option("--ngram-order", ngram_order, "n-gram drafter: longest order (orders 2..N)");
  cmd->add_option("--lookup-cache", lookup_cache, "persistent n-gram statistics file (loaded, then saved at exit)");
  cmd->add_option("--tree-nodes", tree_nodes, "token trees of at most N nodes with any drafter (0: chains, or --draft-max with --spec tree)");
  cmd->add_option("--tree-width", tree_width,
                  "tree: children per node / paths expanded per level / lookup branches (0: the drafters' defaults: 2, and chains for EAGLE when sampling)");
  cmd->add_option("--tree-depth", tree_depth, "tree: deepest level (0: as deep as the node budget)");
  cmd->add_option("--tree-rank-temp", tree_rank_temperature,
                  "greedy trees: rank children and paths at this draft temperature (0: the default, 1; docs/HEADS.md)");
  cmd->add_option("-c,--ctx-size", n_ctx, "context length (0: the model's)");
  cmd->add_option("-t,--threads", n_threads, "threads (0: physical cores)");
  cmd->add_option("--kv-type", kv_type, "KV cache type: f32 or f16 (half the memory and the bytes attention reads)");
  cmd->add_flag("--no-repack", no_repack,
                "keep every weight in the file's layout (default: on AVX2 and AVX-512, Q8_0, Q2_K-Q6_K, Q4_0, Q4_1, Q5_0, Q5_1 and float weights are repacked at load for the SIMD kernels where their rows allow it; the same results)");
}

EngineOptions EngineCliOptions::to_engine_options() const {
  EngineOptions o;
  o.model_path = model;
  o.draft_path = draft;
  o.heads_path = heads;
  if (spec != "auto") o.method = parse_spec_method(spec);
  if (draft_max < 0) throw Error("--draft-max " + std::to_string(draft_max) + " must be >= 0");
  if (draft_min < 0 || draft_min > draft_max)
    throw Error("--draft-min " + std::to_string(draft_min) + " must be in [0, --draft-max]");
  if (!(lenience > 0.0f && lenience <= 1.0f)) throw Error("--lenience " + std::to_string(lenience) + " must be in (0, 1]");
  if (n_threads < 0) throw Error("--threads " + std::to_string(n_threads) + " must be >= 0");
  o.spec.draft_max = draft_max;
  o.spec.draft_min = draft_min;
  o.spec.draft_p_min = draft_p_min;
  o.spec.adaptive = !no_adaptive;
  o.spec.lenience = lenience;
  o.model_free.lookup_min = lookup_min;
  o.model_free.lookup_max = lookup_max;
  o.model_free.ngram_order = ngram_order;
  o.lookup_cache_path = lookup_cache;
  o.tree_nodes = tree_nodes;
  o.tree_width = tree_width;
  o.tree_depth = tree_depth;
  o.tree_rank_temperature = tree_rank_temperature;
  o.n_ctx = n_ctx;
  o.n_threads = n_threads;
  o.repack_weights = !no_repack;
  if (kv_type == "f32") {
    o.kv_type = DType::F32;
  } else if (kv_type == "f16") {
    o.kv_type = DType::F16;
  } else {
    throw Error("--kv-type '" + kv_type + "' must be f32 or f16");
  }
  return o;
}

void SamplingCliOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--temp", params.temperature, "temperature (0 = greedy)");
  cmd->add_option("--top-k", params.top_k, "top-k (0 = off)");
  cmd->add_option("--top-p", params.top_p, "top-p (1 = off)");
  cmd->add_option("--min-p", params.min_p, "min-p (0 = off)");
  cmd->add_option("--repeat-penalty", params.repeat_penalty, "repetition penalty (1 = off)");
  cmd->add_option("--repeat-last-n", params.repeat_last_n, "tokens the penalties look back over");
  cmd->add_option("--presence-penalty", params.presence_penalty, "presence penalty");
  cmd->add_option("--frequency-penalty", params.frequency_penalty, "frequency penalty");
  cmd->add_option("-s,--seed", params.seed, "random seed (same seed + settings + fixed K = same output)");
}

CLI::Validator integer_at_least(long long min_value) {
  const std::string bound = "an integer >= " + std::to_string(min_value);
  return CLI::Validator(
      [min_value, bound](std::string& text) -> std::string {
        long long value = 0;
        size_t used = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "must be " + bound + ", got '" + text + "'";
        if (value < min_value) return "must be " + bound + ", got " + text;
        return "";
      },
      bound);
}

SamplingParams SamplingCliOptions::to_params() const {
  if (params.temperature < 0) throw Error("--temp " + std::to_string(params.temperature) + " must be >= 0");
  if (params.top_p <= 0) throw Error("--top-p " + std::to_string(params.top_p) + " must be > 0");
  return params;
}

int parse_and_run(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args)
    if (a == "-md") a = "--model-draft";
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace specdec::cli
