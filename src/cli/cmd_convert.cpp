// cli/cmd_convert.cpp — `specdec convert-llama2c --model X.bin --tokenizer Y.bin -o Z.gguf
// [--ctx N]`: converts a legacy llama2.c checkpoint and its tokenizer.bin to GGUF.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "specdec/convert.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec::cli {
namespace {

struct ConvertOptions {
  std::string model;
  std::string tokenizer;
  std::string output;
  int64_t context_length = -1;  // -1: the converter's default
};

void run_convert(const ConvertOptions& opt) {
  Llama2cConvertOptions options;
  if (opt.context_length >= 0) options.context_length = static_cast<uint32_t>(opt.context_length);
  const Llama2cConfig c = convert_llama2c(opt.model, opt.tokenizer, opt.output, options);
  const uint32_t n_ctx = GgufFile::open(opt.output)->get_u32("llama.context_length");
  std::fprintf(stderr,
               "wrote %s: llama, dim %d, hidden %d, %d layers, %d heads (%d KV), vocab %d (%s "
               "classifier), context %u (checkpoint seq_len %d)\n",
               opt.output.c_str(), c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
               c.vocab_size, c.shared_classifier ? "shared" : "separate",
               n_ctx, c.seq_len);
}

void setup_convert(CLI::App& app) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert-llama2c", "Convert a legacy llama2.c checkpoint (.bin) and tokenizer.bin to GGUF");
  cmd->add_option("--model", opt->model, "llama2.c checkpoint, legacy format (e.g. stories15M.bin)")
      ->required();
  cmd->add_option("--tokenizer", opt->tokenizer, "llama2.c tokenizer file (e.g. tokenizer.bin)")
      ->required();
  cmd->add_option("-o,--output", opt->output, "GGUF file to write")->required();
  cmd->add_option("--ctx", opt->context_length,
                  "llama.context_length to write (default: 128 like llama.cpp's converter, or "
                  "seq_len when smaller; 0 = the checkpoint's seq_len; at most seq_len)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  cmd->callback([opt]() { run_convert(*opt); });
}

}  // namespace

SPECDEC_COMMAND("convert-llama2c", setup_convert);

}  // namespace specdec::cli
