// fuzz/fuzz_llama2c.cpp — libFuzzer target: the llama2.c importer on arbitrary bytes.
//
// Input layout: byte 0 picks the mode.
//   0: the bytes after it are a checkpoint (header validation against the image size);
//   1: u16 vocab size, then a tokenizer.bin image;
//   2: u32 checkpoint length, the checkpoint, then a tokenizer.bin image: full conversion.
// Crash conditions: any sanitizer report, an exception other than specdec::Error escaping, or a
// conversion whose GGUF does not parse back into a model config with the checkpoint's shape.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "specdec/convert.h"
#include "specdec/gguf.h"
#include "specdec/model.h"

namespace specdec {
namespace {

void check_vocab(const Llama2cVocab& v, int32_t n_vocab) {
  const auto n = static_cast<size_t>(n_vocab);
  FUZZ_PROPERTY(v.tokens.size() == n && v.scores.size() == n && v.types.size() == n,
                "vocab of " + std::to_string(n_vocab) + " entries");
}

void convert(const uint8_t* model, size_t model_size, const uint8_t* tok, size_t tok_size,
             uint8_t context_choice) {
  Llama2cConvertOptions options;
  if (context_choice == 1) options.context_length = 0;
  if (context_choice >= 2) options.context_length = context_choice;
  std::vector<uint8_t> image;
  Llama2cConfig c;
  try {
    c = parse_llama2c_config(model, model_size, "fuzz.bin");
    image = convert_llama2c_image(model, model_size, tok, tok_size, options);
  } catch (const Error&) {
    return;
  }
  // The converter promises a GGUF that our own loader accepts with the checkpoint's shape.
  std::unique_ptr<GgufFile> f;
  ModelConfig mc;
  try {
    f = GgufFile::parse(image.data(), image.size(), "converted.gguf");
    mc = read_model_config(*f);
  } catch (const Error& e) {
    fuzz::property_failed(std::string("converted GGUF does not load: ") + e.what());
  }
  FUZZ_PROPERTY(mc.n_embd == c.dim && mc.n_layers == c.n_layers && mc.n_vocab == c.vocab_size &&
                    mc.n_heads == c.n_heads && mc.n_kv_heads == c.n_kv_heads && mc.n_ff == c.hidden_dim,
                "converted config matches the checkpoint");
}

}  // namespace
}  // namespace specdec

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specdec;
  fuzz::Input in(data, size);
  const uint8_t mode = in.take<uint8_t>();
  switch (mode % 3) {
    case 0:
      try {
        (void)parse_llama2c_config(in.rest(), in.rest_size(), "fuzz.bin");
      } catch (const Error&) {
      }
      break;
    case 1: {
      const int32_t n_vocab = in.take<uint16_t>();
      try {
        check_vocab(parse_llama2c_tokenizer(in.rest(), in.rest_size(), "fuzz-tok.bin", n_vocab), n_vocab);
      } catch (const Error&) {
      }
      break;
    }
    default: {
      const uint8_t context_choice = in.take<uint8_t>();
      const size_t model_size = in.take<uint32_t>() % (in.rest_size() + 1);
      const uint8_t* model = in.rest();
      convert(model, model_size, model + model_size, in.rest_size() - model_size, context_choice);
      break;
    }
  }
  return 0;
}
