// KvCache bookkeeping: append, O(1) truncate, keep_rows compaction and their errors.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "specdec/error.h"
#include "specdec/model.h"

namespace specdec::testing {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 3;
  return c;
}

// Marks slot s of layer l with value 1000*l + s (+0.5 in V).
void fill(KvCache& cache, int first, int n) {
  for (int l = 0; l < cache.n_layers(); ++l) {
    for (int s = first; s < first + n; ++s) {
      for (int d = 0; d < cache.kv_dim(); ++d) {
        cache.k(l, 0, s)[d] = static_cast<float>(1000 * l + s);
        cache.v(l, 0, s)[d] = static_cast<float>(1000 * l + s) + 0.5f;
      }
    }
  }
}

TEST(KvCache, AppendTruncateAndCapacity) {
  KvCache cache(small_config(), 8);
  EXPECT_EQ(cache.capacity(), 8);
  EXPECT_EQ(cache.kv_dim(), 3);
  EXPECT_EQ(cache.append(5), 0);
  EXPECT_EQ(cache.append(3), 5);
  EXPECT_EQ(cache.size(), 8);
  EXPECT_THROW(cache.append(1), Error);
  cache.truncate(2);
  EXPECT_EQ(cache.size(), 2);
  EXPECT_THROW(cache.truncate(3), Error);
  EXPECT_THROW(cache.truncate(-1), Error);
  EXPECT_EQ(cache.append(6), 2);
  EXPECT_THROW(KvCache(small_config(), 0), Error);
  EXPECT_THROW(KvCache(small_config(), 4, DType::Q8_0), Error);
  EXPECT_THROW(KvCache(small_config(), 4, DType::BF16), Error);
}

// F16: half the bytes, values rounded to nearest (ggml's f32 -> f16) on write, float access
// refused, keep_rows compacts the 2-byte rows.
TEST(KvCache, F16StoresRoundedValues) {
  KvCache f32(small_config(), 16), f16(small_config(), 16, DType::F16);
  EXPECT_EQ(f16.type(), DType::F16);
  EXPECT_EQ(f16.row_bytes(), 3 * sizeof(uint16_t));
  EXPECT_EQ(2 * f16.bytes(), f32.bytes());
  EXPECT_THROW(f16.k(0, 0, 0), InternalError);
  f16.append(10);
  for (int l = 0; l < 2; ++l) {
    for (int s = 0; s < 10; ++s) {
      const float k[3] = {1000.0f * l + s + 0.1f, -1.0f / 3.0f, 65504.0f};  // 65504: F16's largest finite
      const float v[3] = {0.5f + s, 1e-7f, -2.0f};                        // 1e-7: a subnormal in F16
      f16.write(l, s, k, v);
      uint16_t want[3];
      quantize_row(DType::F16, k, want, 3);
      ASSERT_EQ(std::memcmp(f16.k_head(l, 0, s), want, sizeof(want)), 0);
      float back[3];
      dequantize_row(DType::F16, f16.v_head(l, 0, s), back, 3);
      EXPECT_EQ(back[0], 0.5f + s);
      EXPECT_NEAR(back[1], 1e-7f, 3e-8f);
      EXPECT_EQ(back[2], -2.0f);
    }
  }
  const std::vector<int> rows = {1, 3, 4, 6};  // offsets from 3: slots 4, 6, 7, 9
  f16.keep_rows(3, rows);
  EXPECT_EQ(f16.size(), 7);
  for (int l = 0; l < 2; ++l) {
    for (size_t i = 0; i < rows.size(); ++i) {
      float back[3];
      dequantize_row(DType::F16, f16.v_head(l, 0, 3 + static_cast<int>(i)), back, 3);
      EXPECT_EQ(back[0], 0.5f + 3 + rows[i]) << "layer " << l << " row " << i;
    }
  }
}

TEST(KvCache, KeepRowsCompactsChosenRowsInOrder) {
  KvCache cache(small_config(), 16);
  cache.append(10);
  fill(cache, 0, 10);
  const std::vector<int> rows = {1, 3, 4, 6};  // offsets from first = 3: slots 4, 6, 7, 9
  cache.keep_rows(3, rows);
  EXPECT_EQ(cache.size(), 7);
  for (int l = 0; l < 2; ++l) {
    for (int s = 0; s < 3; ++s) EXPECT_EQ(cache.k(l, 0, s)[0], 1000 * l + s);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(cache.k(l, 0, 3 + static_cast<int>(i))[2], 1000 * l + 3 + rows[i]);
      EXPECT_EQ(cache.v(l, 0, 3 + static_cast<int>(i))[1], 1000 * l + 3 + rows[i] + 0.5f);
    }
  }
  cache.keep_rows(7, std::vector<int>{});
  EXPECT_EQ(cache.size(), 7);
  EXPECT_THROW(cache.keep_rows(5, std::vector<int>{1, 1}), Error);
  EXPECT_THROW(cache.keep_rows(5, std::vector<int>{2}), Error);  // only rows 0, 1 appended after 5
  EXPECT_THROW(cache.keep_rows(8, std::vector<int>{}), Error);
}

// small_config() with another head shape (query heads, kv heads, head_dim).
ModelConfig config_with_heads(int n_heads, int n_kv_heads, int head_dim) {
  ModelConfig c = small_config();
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  return c;
}

// Head-major layout: write() scatters a slot's kv heads, each head's slots are contiguous
// (slot_stride() = head_dim, head_stride() = capacity * head_dim elements from layer_k), and
// keep_rows and same_slot work per head.
TEST(KvCache, HeadMajorLayoutPerKvHead) {
  const ModelConfig c = config_with_heads(4, 2, 3);
  for (DType type : {DType::F32, DType::F16}) {
    KvCache cache(c, 8, type), other(c, 8, type);
    EXPECT_EQ(cache.slot_stride(), 3u);
    EXPECT_EQ(cache.head_stride(), 8u * 3u);
    EXPECT_EQ(cache.head_bytes() * 2, cache.row_bytes());
    cache.append(5);
    other.append(5);
    const size_t element = type == DType::F32 ? 4 : 2;
    for (int l = 0; l < 2; ++l) {
      for (int s = 0; s < 5; ++s) {
        const float k[6] = {1.0f * s, 2.0f, 3.0f, 100.0f + s, 5.0f, 6.0f + l};  // head 0, then head 1
        const float v[6] = {-1.0f * s, -2.0f, -3.0f, -100.0f - s, -5.0f, -6.0f - l};
        cache.write(l, s, k, v);
        other.write(l, 4 - s, k, v);
        const uint8_t* base = static_cast<const uint8_t*>(cache.layer_k(l));
        EXPECT_EQ(cache.k_head(l, 1, s), base + (s * cache.slot_stride() + cache.head_stride()) * element);
        float back[3];
        dequantize_row(type, cache.k_head(l, 1, s), back, 3);
        EXPECT_EQ(back[0], 100.0f + s);
        EXPECT_EQ(back[2], 6.0f + l);
        dequantize_row(type, cache.v_head(l, 0, s), back, 3);
        EXPECT_EQ(back[0], -1.0f * s);
      }
    }
    for (int s = 0; s < 5; ++s) {
      EXPECT_TRUE(cache.same_slot(s, other, 4 - s)) << s;
      EXPECT_EQ(cache.same_slot(s, other, s), s == 2) << s;
    }
    cache.keep_rows(1, std::vector<int>{1, 3});  // slots 2 and 4 move to 1 and 2
    EXPECT_TRUE(cache.same_slot(1, other, 2));
    EXPECT_TRUE(cache.same_slot(2, other, 0));
    EXPECT_FALSE(cache.same_slot(0, KvCache(small_config(), 8, type), 0));  // another shape
  }
}

// Every kv head's rows start on a cache line when a head row is a multiple of 64 bytes (head_dim
// 64: 256 bytes in F32, 128 in F16), so attention's 32-byte loads never straddle two lines.
TEST(KvCache, HeadRowsStartOnCacheLines) {
  const ModelConfig c = config_with_heads(6, 3, 64);
  for (DType type : {DType::F32, DType::F16}) {
    for (int capacity : {1, 7, 100}) {
      const KvCache cache(c, capacity, type);
      for (int l = 0; l < c.n_layers; ++l) {
        for (int h = 0; h < c.n_kv_heads; ++h) {
          for (int s = 0; s < capacity; ++s) {
            EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.k_head(l, h, s)) % 64, 0u) << l << " " << h << " " << s;
            EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.v_head(l, h, s)) % 64, 0u) << l << " " << h << " " << s;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace specdec::testing
