#include "common/testing.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "specdec/error.h"

namespace specdec::testing {

std::string fixtures_dir() {
  if (const char* env = std::getenv("SPECDEC_FIXTURES"); env && *env) return env;
  return (std::filesystem::path(SPECDEC_SOURCE_DIR) / ".." / "shared" / "fixtures").string();
}

std::string find_fixture(const std::string& relative) {
  std::string path = fixtures_dir() + "/" + relative;
  return std::filesystem::exists(path) ? path : std::string();
}

bool fixtures_required() {
  const char* env = std::getenv("SPECDEC_REQUIRE_FIXTURES");
  return env && std::string(env) == "1";
}

uint64_t test_seed(const char* what) {
  uint64_t seed;
  if (const char* env = std::getenv("SPECDEC_TEST_SEED"); env && *env) {
    seed = std::strtoull(env, nullptr, 0);
  } else {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  std::printf("[seed] %s SPECDEC_TEST_SEED=%llu\n", what, static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

std::string temp_dir() {
  static std::string dir = [] {
    auto base = std::filesystem::temp_directory_path() /
                ("specdec-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(base);
    // Removed when the test process exits normally (set SPECDEC_KEEP_TEST_FILES=1 to inspect
    // them). Forked children leave with _exit and so never run this.
    static const std::string to_remove = base.string();
    std::atexit([] {
      const char* keep = std::getenv("SPECDEC_KEEP_TEST_FILES");
      if (keep && *keep && std::string(keep) != "0") return;
      std::error_code ignored;
      std::filesystem::remove_all(to_remove, ignored);
    });
    return base.string();
  }();
  return dir;
}

int sanitizer_slowdown() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 8;
#else
  return 1;
#endif
}

bool detection_power_checked() { return sanitizer_slowdown() == 1; }

int planted_bug_trials(int n_trials) { return n_trials / sanitizer_slowdown(); }

std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("cannot open " + path);
  auto size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> out(size / sizeof(float));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
  return out;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("cannot write " + path);
}

}  // namespace specdec::testing
