// Resource limits of the model layer: a KV cache that cannot fit in the available memory is
// refused before anything is allocated, with a message saying how much it would need; shapes
// whose sizes overflow are refused instead of wrapping around.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/model.h"
#include "specdec/sys_memory.h"

namespace specdec::testing {
namespace {

// Sets SPECDEC_MEMORY_LIMIT_MB for the lifetime of the object.
class ScopedMemoryLimit {
 public:
  explicit ScopedMemoryLimit(const char* mb) { ::setenv("SPECDEC_MEMORY_LIMIT_MB", mb, 1); }
  ~ScopedMemoryLimit() { ::unsetenv("SPECDEC_MEMORY_LIMIT_MB"); }
};

ModelConfig config(int n_layers, int n_kv_heads, int head_dim) {
  ModelConfig c;
  c.n_layers = n_layers;
  c.n_heads = n_kv_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  return c;
}

std::string error_of(const ModelConfig& c, int n_ctx) {
  try {
    KvCache cache(c, n_ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ResourceLimits, AvailableMemoryIsMeasured) {
  const std::optional<uint64_t> available = available_memory_bytes();
  ASSERT_TRUE(available.has_value()) << "/proc/meminfo has no MemAvailable";
  EXPECT_GT(*available, 0u);
  ScopedMemoryLimit limit("3");
  EXPECT_EQ(available_memory_bytes(), std::optional<uint64_t>(3u << 20));
}

TEST(ResourceLimits, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 << 10), "3.00 KiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.50 GiB");
}

TEST(ResourceLimits, HugeKvCacheIsRefusedWithTheMemoryItNeeds) {
  // 80 layers x 2^24 positions x kv_dim 8192 x 2 x 4 bytes = 80 TiB: more than any test machine.
  const std::string msg = error_of(config(80, 64, 128), 1 << 24);
  ASSERT_FALSE(msg.empty()) << "an 80 TiB cache was accepted";
  EXPECT_NE(msg.find("needs 80.00 TiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("16777216"), std::string::npos) << msg;
  EXPECT_NE(msg.find("available"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--ctx-size"), std::string::npos) << msg;
}

TEST(ResourceLimits, LimitIsTheAvailableMemory) {
  // 2 layers x 1024 positions x kv_dim 256 x 2 x 4 bytes = 4 MiB.
  const ModelConfig c = config(2, 2, 128);
  {
    ScopedMemoryLimit limit("3");
    const std::string msg = error_of(c, 1024);
    EXPECT_NE(msg.find("needs 4.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("only 3.00 MiB"), std::string::npos) << msg;
  }
  {
    ScopedMemoryLimit limit("5");
    EXPECT_EQ(error_of(c, 1024), "");
  }
}

TEST(ResourceLimits, OverflowingKvDimIsRefused) {
  // n_kv_heads * head_dim = 2^40 does not fit in an int: refused, not wrapped.
  const std::string msg = error_of(config(1, 1 << 20, 1 << 20), 1);
  EXPECT_NE(msg.find("invalid model shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1099511627776"), std::string::npos) << msg;
}

TEST(ResourceLimits, NewCacheOfARealModelHonoursTheLimit) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto model = Transformer::load(path, ModelOptions{1});
  ScopedMemoryLimit limit("0");
  try {
    model->new_cache(128);
    ADD_FAILURE() << "a cache was allocated with 0 bytes available";
  } catch (const Error& e) {
    // 5 layers x 128 positions x kv_dim 32 x 2 x 4 bytes = 160 KiB.
    EXPECT_NE(std::string(e.what()).find("needs 160.00 KiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specdec::testing
