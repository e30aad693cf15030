// `specdec generate`: stream a continuation of a prompt to stdout, stats to stderr.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "specdec/engine.h"
#include "specdec/error.h"

namespace specdec::cli {

namespace {

struct GenerateArgs {
  EngineCliOptions engine;
  SamplingCliOptions sampling;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;
  std::vector<std::string> stop;
  bool show_drafts = false;
  bool compare_plain = false;
  bool no_stream = false;
  bool no_display_prompt = false;
};

const char* color_of(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::AcceptedDraft: return "\033[32m";  // green: accepted draft tokens
    case TokenOrigin::Corrected: return "\033[33m";      // yellow: rejected draft, corrected by the target
    case TokenOrigin::Bonus: return "\033[36m";          // cyan: bonus token after a fully accepted draft
    case TokenOrigin::Plain: return "";
  }
  return "";
}

void print_stats(const char* label, const GenerateResult& r) {
  const auto& s = r.stats;
  const double prefill_tps = r.prefill_seconds > 0 ? r.n_prompt_tokens / r.prefill_seconds : 0.0;
  const double decode_tps = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0.0;
  std::fprintf(stderr,
               "[%s] prompt %d tokens (%d cached), generated %zu tokens, finish %s | prefill %.1f tok/s, "
               "decode %.1f tok/s\n",
               label, r.n_prompt_tokens, r.n_cached_prompt_tokens, r.tokens.size(), finish_reason_name(r.finish),
               prefill_tps, decode_tps);
  if (r.drafter_name.empty()) return;
  std::fprintf(stderr,
               "[%s] drafter %s: target passes %lld, drafted %lld, accepted %lld, acceptance %.3f, "
               "tokens/pass %.2f, c_draft %.4f, verify_cost %.3f%s\n",
               label, r.drafter_name.c_str(), static_cast<long long>(s.n_target_passes),
               static_cast<long long>(s.n_drafted), static_cast<long long>(s.n_accepted), s.acceptance_rate(),
               s.mean_tokens_per_pass(), s.c_draft, s.verify_cost, s.lossy ? " (LOSSY: lenience < 1)" : "");
  if (s.n_tree_steps > 0)
    std::fprintf(stderr, "[%s] token trees: %lld tree steps of %lld drafting steps, nodes verified/step %.2f, "
                 "accepted depth/step %.2f\n", label, static_cast<long long>(s.n_tree_steps),
                 static_cast<long long>(s.n_drafting_steps), s.mean_nodes_per_drafting_step(), s.mean_accepted_depth());
  auto by_pos = s.acceptance_by_position();
  if (!by_pos.empty()) {
    std::fprintf(stderr, "[%s] acceptance by draft position:", label);
    for (size_t k = 0; k < by_pos.size() && k < 16; ++k) std::fprintf(stderr, " %zu:%.2f", k + 1, by_pos[k]);
    std::fprintf(stderr, "\n");
  }
}

void run_generate(const GenerateArgs& args) {
  EngineOptions options = args.engine.to_engine_options();
  Engine engine(options);
  GenerateRequest request;
  if (!args.prompt_file.empty()) {
    // A directory opens as an empty stream: it would silently become an empty prompt.
    std::error_code ignored;
    if (std::filesystem::is_directory(args.prompt_file, ignored))
      throw Error("prompt file '" + args.prompt_file + "' is a directory");
    std::ifstream in(args.prompt_file, std::ios::binary);
    if (!in) throw Error("cannot read prompt file '" + args.prompt_file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    request.prompt = ss.str();
  } else {
    request.prompt = args.prompt;
  }
  request.max_tokens = args.n_predict;
  request.sampling = args.sampling.to_params();
  request.stop = args.stop;

  const bool tty = ::isatty(STDOUT_FILENO);
  const bool color = args.show_drafts && tty;
  if (args.show_drafts && !tty)
    std::fprintf(stderr, "note: --show-drafts colors only when stdout is a terminal\n");
  if (color)
    std::fprintf(stderr, "legend: \033[32maccepted draft\033[0m \033[33mcorrected\033[0m \033[36mbonus\033[0m plain\n");

  auto stream = [&](const StreamPiece& piece) {
    if (args.no_stream) return true;
    if (color && piece.origin != TokenOrigin::Plain) {
      std::fprintf(stdout, "%s%.*s\033[0m", color_of(piece.origin), static_cast<int>(piece.text.size()),
                   piece.text.data());
    } else {
      std::fwrite(piece.text.data(), 1, piece.text.size(), stdout);
    }
    std::fflush(stdout);
    return true;
  };

  GenerateResult plain;
  if (args.compare_plain) {
    request.speculative = false;
    plain = engine.generate(request, {});
    request.speculative = true;
  }
  if (!args.no_stream && !args.no_display_prompt) {
    std::fwrite(request.prompt.data(), 1, request.prompt.size(), stdout);
    std::fflush(stdout);
  }
  GenerateResult spec = engine.generate(request, stream);
  if (!args.no_stream) std::fputc('\n', stdout);
  std::fflush(stdout);
  if (spec.finish == FinishReason::ContextFull)
    std::fprintf(stderr, "stopped: the context of %d tokens is full\n", engine.n_ctx());
  print_stats(spec.drafter_name.empty() ? "plain" : "speculative", spec);
  if (args.compare_plain) {
    print_stats("plain", plain);
    const double spec_tps = spec.decode_seconds > 0 ? spec.tokens.size() / spec.decode_seconds : 0;
    const double plain_tps = plain.decode_seconds > 0 ? plain.tokens.size() / plain.decode_seconds : 0;
    std::fprintf(stderr, "speedup over plain decoding (same run): %.2fx (%.1f vs %.1f tok/s)%s\n",
                 plain_tps > 0 ? spec_tps / plain_tps : 0.0, spec_tps, plain_tps,
                 request.sampling.greedy() ? (spec.tokens == plain.tokens ? "; outputs identical" : "; OUTPUTS DIFFER")
                                           : "; sampled: same distribution, different text expected");
  }
  engine.save_lookup_cache();
}

void setup_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt (speculative when a drafter is set)");
  args->engine.add_to(cmd);
  args->sampling.add_to(cmd);
  auto* p = cmd->add_option("-p,--prompt", args->prompt, "prompt text");
  cmd->add_option("-f,--file", args->prompt_file, "read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", args->n_predict, "tokens to generate")->check(integer_at_least(1));
  cmd->add_option("--stop", args->stop, "stop string (repeatable)");
  cmd->add_flag("--show-drafts", args->show_drafts, "color accepted / corrected / bonus tokens (TTY only)");
  cmd->add_flag("--compare-plain", args->compare_plain, "also run plain decoding and print the speedup");
  cmd->add_flag("--no-stream", args->no_stream, "do not print the generated text");
  cmd->add_flag("--no-display-prompt", args->no_display_prompt, "print only the generated text, not the prompt");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace

SPECDEC_COMMAND("generate", setup_generate);

}  // namespace specdec::cli
