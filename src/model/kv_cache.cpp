// model/kv_cache.cpp — per-sequence K/V storage with O(1) truncate and tree compaction.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "specdec/error.h"
#include "specdec/model.h"
#include "specdec/sys_memory.h"

namespace specdec {
namespace {

// n_kv_heads * head_dim without int overflow; 0 when out of range (rejected by the constructor).
int checked_kv_dim(const ModelConfig& config) {
  const int64_t kv_dim = int64_t{config.n_kv_heads} * int64_t{config.head_dim};
  return kv_dim > 0 && kv_dim <= (int64_t{1} << 30) ? static_cast<int>(kv_dim) : 0;
}

// Refuses a cache that cannot fit in the memory still available, before allocating it (a user's
// context length would otherwise end in an out-of-memory kill).
void check_fits_in_memory(int n_layers, int n_ctx, int kv_dim, size_t element_bytes) {
  // K and V: 2 x (n_layers, n_ctx, kv_dim) elements; each factor < 2^31, so no overflow in 128 bits.
  const unsigned __int128 n_bytes = static_cast<unsigned __int128>(2 * element_bytes) *
                                    static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(n_ctx) *
                                    static_cast<uint64_t>(kv_dim);
  const std::optional<uint64_t> available = available_memory_bytes();
  if (!available || n_bytes <= *available) return;
  const std::string needed = n_bytes > UINT64_MAX ? std::string("more than 16 EiB")
                                                  : format_bytes(static_cast<uint64_t>(n_bytes));
  throw Error("KV cache: a context of " + std::to_string(n_ctx) + " tokens needs " + needed +
              " (2 x " + std::to_string(n_layers) + " layers x " + std::to_string(n_ctx) +
              " positions x kv_dim " + std::to_string(kv_dim) + " x " + std::to_string(element_bytes) + " bytes) but only " +
              format_bytes(*available) + " of memory is available; use a smaller context length (--ctx-size)");
}

}  // namespace

KvCache::KvCache(const ModelConfig& config, int n_ctx, DType type)
    : n_layers_(config.n_layers),
      n_ctx_(n_ctx),
      kv_dim_(checked_kv_dim(config)),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      type_(type) {
  if (type != DType::F32 && type != DType::F16)
    throw Error(std::string("KV cache: type ") + dtype_name(type) + " is not supported (f32 or f16)");
  if (n_ctx <= 0) throw Error("KV cache: context length " + std::to_string(n_ctx) + " must be positive");
  if (n_layers_ <= 0 || kv_dim_ <= 0 || n_kv_heads_ <= 0 || head_dim_ <= 0) {
    throw Error("KV cache: invalid model shape (n_layers " + std::to_string(n_layers_) + ", kv_dim " +
                std::to_string(int64_t{config.n_kv_heads} * config.head_dim) + ")");
  }
  const size_t element_bytes = type == DType::F32 ? sizeof(float) : sizeof(uint16_t);
  check_fits_in_memory(n_layers_, n_ctx_, kv_dim_, element_bytes);
  row_bytes_ = element_bytes * static_cast<size_t>(kv_dim_);
  const size_t n = static_cast<size_t>(n_layers_) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(kv_dim_);
  if (type == DType::F32) {
    k32_.assign(n, 0.0f);  // (n_layers, n_kv_heads, n_ctx, head_dim)
    v32_.assign(n, 0.0f);
  } else {
    k16_.assign(n, 0);  // (n_layers, n_kv_heads, n_ctx, head_dim)
    v16_.assign(n, 0);
  }
}

size_t KvCache::offset(int layer, int kv_head, int slot) const {
  return ((static_cast<size_t>(layer) * static_cast<size_t>(n_kv_heads_) + static_cast<size_t>(kv_head)) *
              static_cast<size_t>(n_ctx_) +
          static_cast<size_t>(slot)) *
         static_cast<size_t>(head_dim_);
}

size_t KvCache::f32_offset(int layer, int kv_head, int slot) const {
  SPECDEC_CHECK(type_ == DType::F32, "KV cache: float access to an F16 cache");
  return offset(layer, kv_head, slot);
}

const void* KvCache::at(const CacheLineVector<float>& f32, const CacheLineVector<uint16_t>& f16, int layer, int kv_head,
                        int slot) const {
  if (type_ == DType::F32) return f32.data() + offset(layer, kv_head, slot);
  return f16.data() + offset(layer, kv_head, slot);
}

void KvCache::write(int layer, int slot, const float* k, const float* v) {
  for (int h = 0; h < n_kv_heads_; ++h) {
    void* k_dst = const_cast<void*>(k_head(layer, h, slot));
    void* v_dst = const_cast<void*>(v_head(layer, h, slot));
    const float* k_src = k + static_cast<size_t>(h) * head_dim_;
    const float* v_src = v + static_cast<size_t>(h) * head_dim_;
    if (type_ == DType::F32) {
      std::memcpy(k_dst, k_src, head_bytes());
      std::memcpy(v_dst, v_src, head_bytes());
    } else {
      quantize_row(DType::F16, k_src, k_dst, head_dim_);  // round to nearest even, as ggml's f32 -> f16
      quantize_row(DType::F16, v_src, v_dst, head_dim_);
    }
  }
}

bool KvCache::same_slot(int slot, const KvCache& other, int other_slot) const {
  if (other.type_ != type_ || other.n_layers_ != n_layers_ || other.n_kv_heads_ != n_kv_heads_ ||
      other.head_dim_ != head_dim_)
    return false;
  for (int l = 0; l < n_layers_; ++l) {
    for (int h = 0; h < n_kv_heads_; ++h) {
      if (std::memcmp(k_head(l, h, slot), other.k_head(l, h, other_slot), head_bytes()) != 0 ||
          std::memcmp(v_head(l, h, slot), other.v_head(l, h, other_slot), head_bytes()) != 0)
        return false;
    }
  }
  return true;
}

void KvCache::truncate(int n) {
  if (n < 0 || n > n_used_) {
    throw Error("KV cache: truncate(" + std::to_string(n) + ") outside [0, " + std::to_string(n_used_) + "]");
  }
  n_used_ = n;
}

void KvCache::keep_rows(int first, std::span<const int> rows) {
  if (first < 0 || first > n_used_) {
    throw Error("KV cache: keep_rows first " + std::to_string(first) + " outside [0, " +
                std::to_string(n_used_) + "]");
  }
  const int n_appended = n_used_ - first;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n_appended || (i > 0 && rows[i] <= rows[i - 1])) {
      throw Error("KV cache: keep_rows row " + std::to_string(rows[i]) + " (index " + std::to_string(i) +
                  ") must be strictly increasing and < " + std::to_string(n_appended));
    }
  }
  for (int layer = 0; layer < n_layers_; ++layer) {
    for (int h = 0; h < n_kv_heads_; ++h) {
      for (size_t i = 0; i < rows.size(); ++i) {
        const int src = first + rows[i];
        const int dst = first + static_cast<int>(i);
        if (src == dst) continue;
        // dst < src always (rows strictly increasing), and no later source is overwritten.
        std::memcpy(const_cast<void*>(k_head(layer, h, dst)), k_head(layer, h, src), head_bytes());
        std::memcpy(const_cast<void*>(v_head(layer, h, dst)), v_head(layer, h, src), head_bytes());
      }
    }
  }
  n_used_ = first + static_cast<int>(rows.size());
}

int KvCache::append(int n) {
  if (n < 0 || n > n_ctx_ - n_used_) {
    throw Error("KV cache: " + std::to_string(n) + " more positions do not fit in the context of " +
                std::to_string(n_ctx_) + " (" + std::to_string(n_used_) + " used)");
  }
  const int first = n_used_;
  n_used_ += n;
  return first;
}

}  // namespace specdec
