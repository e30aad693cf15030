// fuzz/fuzz_gguf.cpp — libFuzzer target: GgufFile::parse on arbitrary bytes, then everything a
// loader does with the result (typed metadata getters, the tensor table and each tensor's bytes,
// the model config and the tokenizer tables). When the metadata makes a valid model config, the
// image is also loaded as a model (Transformer::load through a memfd: weight types and shapes)
// and one token is run through it.
//
// Crash conditions: any sanitizer report, an exception other than specdec::Error escaping, or a
// broken guarantee of GgufFile::parse (tensor bytes outside the input, misaligned offsets,
// lookups that do not find their own entries).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_common.h"
#include "specdec/gguf.h"
#include "specdec/model.h"
#include "specdec/tokenizer.h"

namespace specdec {
namespace {

// Calls every typed getter on `key`; each either returns or throws Error (wrong type).
void touch_typed(const GgufFile& f, const std::string& key) {
  try { (void)f.get_string(key); } catch (const Error&) {}
  try { (void)f.get_u64(key); } catch (const Error&) {}
  try { (void)f.get_i64(key); } catch (const Error&) {}
  try { (void)f.get_u32(key); } catch (const Error&) {}
  try { (void)f.get_f32(key); } catch (const Error&) {}
  try { (void)f.get_bool(key); } catch (const Error&) {}
  try { (void)f.get_string_array(key); } catch (const Error&) {}
  try { (void)f.get_f32_array(key); } catch (const Error&) {}
  try { (void)f.get_i32_array(key); } catch (const Error&) {}
}

void check_tensors(const GgufFile& f, const uint8_t* data, size_t size) {
  volatile uint8_t sink = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    FUZZ_PROPERTY(f.find_tensor(t.name) == &t, "tensor lookup of '" + t.name + "'");
    FUZZ_PROPERTY(t.offset % f.alignment() == 0, "aligned offset of '" + t.name + "'");
    FUZZ_PROPERTY(t.n_elements() > 0, "element count of '" + t.name + "'");
    FUZZ_PROPERTY(t.data >= data && t.n_bytes <= static_cast<uint64_t>(data + size - t.data),
                  "bytes of '" + t.name + "' inside the image");
    if (t.n_bytes > 0) sink = static_cast<uint8_t>(sink + t.data[0] + t.data[t.n_bytes - 1]);
  }
  (void)sink;
}

void exercise_tokenizer(const GgufFile& f) {
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = Tokenizer::from_gguf(f);
  } catch (const Error&) {
    return;
  }
  const int n_vocab = tok->n_vocab();
  for (const char* text : {"Hello world", " <s>x\n\n", "\xC3(\xE2\x96\x81 z"}) {
    for (bool parse_special : {false, true}) {
      const std::vector<Token> ids = tok->encode(text, true, parse_special);
      for (Token id : ids) FUZZ_PROPERTY(id >= 0 && id < n_vocab, "encoded id " + std::to_string(id));
      (void)tok->decode(ids, parse_special);
    }
  }
  StreamingDetokenizer detok(*tok);
  for (Token id = -2; id < n_vocab + 2 && id < 300; ++id) {
    (void)tok->token_to_piece(id, true);
    (void)detok.push(id);
  }
  (void)detok.flush();
}

// Loads the image as a model from an in-memory file and decodes one token.
void exercise_model(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("fuzz-model", MFD_CLOEXEC);
  if (fd < 0) return;
  const bool written = ::write(fd, data, size) == static_cast<ssize_t>(size);
  if (written) {
    try {
      auto model = Transformer::load("/proc/self/fd/" + std::to_string(fd), ModelOptions{1});
      KvCache cache = model->new_cache(std::min(4, model->config().n_ctx_train));
      KvCache* caches[] = {&cache};
      Batch batch;
      batch.add(std::min(1, model->config().n_vocab - 1), 0, -1, 0, true);
      Logits logits;
      model->forward(batch, caches, logits);
      FUZZ_PROPERTY(logits.n_rows() == 1 && logits.n_vocab == model->config().n_vocab &&
                        logits.data.size() == static_cast<size_t>(logits.n_vocab),
                    "one row of logits");
    } catch (const Error&) {
    }
  }
  ::close(fd);
}

}  // namespace
}  // namespace specdec

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specdec;
  std::unique_ptr<GgufFile> f;
  try {
    f = GgufFile::parse(data, size, "fuzz.gguf");
  } catch (const Error&) {
    return 0;
  }
  for (const auto& [key, value] : f->metadata()) {
    FUZZ_PROPERTY(f->find(key) == &value, "metadata lookup of '" + key + "'");
    (void)gguf_value_to_string(value);
    (void)gguf_value_type_description(value);
    touch_typed(*f, key);
  }
  check_tensors(*f, data, size);
  bool is_model = false;
  try {
    (void)read_model_config(*f);
    is_model = true;
  } catch (const Error&) {
  }
  exercise_tokenizer(*f);
  if (is_model) exercise_model(data, size);
  return 0;
}
