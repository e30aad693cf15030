// Opening things that are not model files: every path ends in specdec::Error naming the path and
// the reason (never a hang, a crash or a silent empty model). Also the from-memory llama2.c
// entry points the fuzz target uses.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/testing.h"
#include "specdec/convert.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/model.h"

namespace specdec {
namespace {

// Runs `open` and returns its Error message ("" when it did not throw).
std::string error_of(const std::function<void()>& open) {
  try {
    open();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::string& path, const std::string& reason) {
  const std::vector<std::pair<const char*, std::function<void()>>> openers = {
      {"GgufFile::open", [&] { GgufFile::open(path); }},
      {"Transformer::load", [&] { Transformer::load(path, ModelOptions{1}); }},
      {"read_llama2c_config", [&] { read_llama2c_config(path); }},
  };
  for (const auto& [name, open] : openers) {
    const std::string msg = error_of(open);
    EXPECT_NE(msg.find(path), std::string::npos) << name << ": message must name the path: " << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << name << ": " << msg;
  }
}

TEST(OpenFailures, Directory) { expect_refused(testing::temp_dir(), "is a directory"); }

TEST(OpenFailures, CharacterDevice) { expect_refused("/dev/null", "is a character device"); }

TEST(OpenFailures, MissingFile) {
  expect_refused(testing::temp_dir() + "/no-such-model.gguf", "No such file or directory");
}

TEST(OpenFailures, FifoDoesNotHang) {
  // A FIFO without a writer would block open() forever without O_NONBLOCK.
  const std::string path = testing::temp_dir() + "/model.fifo";
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  expect_refused(path, "is a pipe");
}

TEST(OpenFailures, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: permissions do not stop reading";
  const std::string path = testing::temp_dir() + "/unreadable.gguf";
  std::ofstream(path) << "GGUF";
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  expect_refused(path, "Permission denied");
}

TEST(OpenFailures, EmptyAndProcFiles) {
  const std::string empty = testing::temp_dir() + "/empty-file.gguf";
  std::ofstream(empty).close();
  EXPECT_NE(error_of([&] { GgufFile::open(empty); }).find("empty"), std::string::npos);
  // /proc files report size 0: seen as empty, not read past.
  EXPECT_NE(error_of([] { GgufFile::open("/proc/self/status"); }).find("empty"), std::string::npos);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(OpenFailures, MmapFailureNamesTheFileAndSize) {
  // A sparse 8 GiB file mapped under a 4 GiB address-space limit: mmap fails with ENOMEM.
  const std::string path = testing::temp_dir() + "/sparse.gguf";
  {
    std::ofstream(path) << "GGUF";
  }
  std::filesystem::resize_file(path, uint64_t{8} << 30);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit limit{uint64_t{4} << 30, uint64_t{4} << 30};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    const std::string msg = error_of([&] { GgufFile::open(path); });
    const bool ok = msg.find("cannot mmap '" + path + "' (8589934592 bytes)") != std::string::npos;
    if (!ok) std::fprintf(stderr, "message: %s\n", msg.c_str());
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::filesystem::remove(path);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child could not set the limit (3) or got another message (1)";
}
#endif

// ---- llama2.c from-memory entry points (used by fuzz/fuzz_llama2c.cpp).

std::vector<uint8_t> tiny_checkpoint() {
  // dim 2, hidden 1, 1 layer, 1 head, 1 kv head, vocab 3, seq_len 1: 36 floats after the header.
  const int32_t header[7] = {2, 1, 1, 1, 1, 3, 1};
  std::vector<uint8_t> bytes(sizeof header + 36 * sizeof(float), 0);
  std::memcpy(bytes.data(), header, sizeof header);
  return bytes;
}

std::vector<uint8_t> tokenizer_image(const std::vector<std::string>& pieces) {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  const int32_t max_len = 8;
  put(&max_len, 4);
  for (const std::string& piece : pieces) {
    const float score = 0.0f;
    const auto len = static_cast<int32_t>(piece.size());
    put(&score, 4);
    put(&len, 4);
    put(piece.data(), piece.size());
  }
  return out;
}

TEST(Llama2cFromMemory, ConvertsATinyCheckpoint) {
  const auto model = tiny_checkpoint();
  const auto tok = tokenizer_image({"<unk>", "<s>", "</s>"});
  const Llama2cConfig c = parse_llama2c_config(model.data(), model.size(), "tiny.bin");
  EXPECT_EQ(c.dim, 2);
  EXPECT_EQ(c.vocab_size, 3);
  const Llama2cVocab v = parse_llama2c_tokenizer(tok.data(), tok.size(), "tok.bin", 3);
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"<unk>", "<s>", "</s>"}));
  const std::vector<uint8_t> gguf = convert_llama2c_image(model.data(), model.size(), tok.data(), tok.size());
  auto f = GgufFile::parse(gguf.data(), gguf.size(), "converted.gguf");
  const ModelConfig mc = read_model_config(*f);
  EXPECT_EQ(mc.n_embd, 2);
  EXPECT_EQ(mc.n_vocab, 3);
  EXPECT_EQ(mc.n_ctx_train, 1);
}

TEST(Llama2cFromMemory, BadImagesNameTheProblem) {
  auto model = tiny_checkpoint();
  model.pop_back();
  EXPECT_NE(error_of([&] { parse_llama2c_config(model.data(), model.size(), "cut.bin"); }).find("'cut.bin' is truncated"),
            std::string::npos);
  const auto tok = tokenizer_image({"<unk>", "<s>"});
  const std::string msg = error_of([&] { parse_llama2c_tokenizer(tok.data(), tok.size(), "tok.bin", 3); });
  EXPECT_NE(msg.find("'tok.bin' is truncated while reading the score of token 2"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { parse_llama2c_tokenizer(tok.data(), tok.size(), "tok.bin", -1); }).find("negative"),
            std::string::npos);
}

}  // namespace
}  // namespace specdec
