// kernels/attention.cpp — scaled dot-product attention of M query rows of one sequence over
// its KV cache, with grouped-query heads and per-row extra (tree ancestor) slots.
//
// Work split: one task per (kv head, tile of up to kRowTile query rows), and when that gives
// fewer tasks than threads, per part of the kv head's query heads. Within a task the queries
// of its heads for all rows of the tile are gathered into (n_q, head_dim); each K/V row that
// all rows of the tile see at the same logical index (the cached prefix, and the leading
// ancestors they share, or all of a chain's) is read once for all of them, and each row's other
// extra slots for that row's heads only. Every query computes its scores, softmax and weighted
// V sum over its visible keys in logical order (prefix 0..n_prefix-1, then its extras in the
// given order) with the same per-query inner loops, so neither M, the tiling, the slot numbers
// nor the thread count change a bit of the result.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention_impl.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "specdec/thread_pool.h"

namespace specdec {

namespace attention_detail {
namespace {

inline float value_of(float x) { return x; }
inline float value_of(uint16_t h) { return fp16_to_f32(h); }

template <typename E>
void scores_scalar_any(const float* q, int n_q, const E* const* keys, int n_keys, int head_dim, float scale,
                       float* scores, size_t score_stride) {
  for (int i = 0; i < n_q; ++i) {
    const float* qi = q + static_cast<size_t>(i) * head_dim;
    for (int j = 0; j < n_keys; ++j) {
      float sum = 0.0f;
      for (int d = 0; d < head_dim; ++d) sum += qi[d] * value_of(keys[j][d]);
      scores[static_cast<size_t>(i) * score_stride + j] = sum * scale;
    }
  }
}

template <typename E>
void accumulate_scalar_any(const float* weights, size_t weight_stride, int n_q, const E* const* values, int n_keys,
                           int head_dim, float* out) {
  for (int i = 0; i < n_q; ++i) {
    float* oi = out + static_cast<size_t>(i) * head_dim;
    for (int j = 0; j < n_keys; ++j) {
      const float w = weights[static_cast<size_t>(i) * weight_stride + j];
      for (int d = 0; d < head_dim; ++d) oi[d] += w * value_of(values[j][d]);
    }
  }
}

}  // namespace

void scores_scalar(const float* q, int n_q, const float* const* keys, int n_keys, int head_dim, float scale,
                   float* scores, size_t score_stride) {
  scores_scalar_any(q, n_q, keys, n_keys, head_dim, scale, scores, score_stride);
}

void scores_scalar_f16(const float* q, int n_q, const uint16_t* const* keys, int n_keys, int head_dim, float scale,
                       float* scores, size_t score_stride) {
  scores_scalar_any(q, n_q, keys, n_keys, head_dim, scale, scores, score_stride);
}

void accumulate_scalar(const float* weights, size_t weight_stride, int n_q, const float* const* values, int n_keys,
                       int head_dim, float* out) {
  accumulate_scalar_any(weights, weight_stride, n_q, values, n_keys, head_dim, out);
}

void accumulate_scalar_f16(const float* weights, size_t weight_stride, int n_q, const uint16_t* const* values,
                           int n_keys, int head_dim, float* out) {
  accumulate_scalar_any(weights, weight_stride, n_q, values, n_keys, head_dim, out);
}

}  // namespace attention_detail

namespace {

using attention_detail::kKeyBlock;
using attention_detail::kScoreKeyBlock;
// Rows per tile: from kMinRowTile to kRowTile, whichever count of tiles finishes first on the
// call's threads (see attention()). Each tile rereads the keys and values: at 4k cached keys of
// the 1B shape one tile of 9 rows took ~0.9x the time of 5 + 4 on one thread, ~0.97x on two (K/V
// in L3), and a whole 9-row forward of the 1B Q8_0 model, whose layers' K/V come from memory,
// 0.70-1.03x, median 0.88 (BENCHMARKS 48f).
constexpr int kRowTile = 16;
constexpr int kMinRowTile = 8;
constexpr int kPrefetchAhead = 64;  // keys

// Asks for the cache lines of n bytes at p (a hint: no fault, no effect on results).
[[gnu::always_inline]] inline void prefetch_bytes(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) __builtin_prefetch(p + i, 0, 3);
}

// K or V rows: slot s, kv head g starts at data + (s * stride + g * head_dim) * element_bytes.
struct KvRows {
  const uint8_t* data;
  DType type;            // F32 or F16
  size_t element_bytes;  // 4 or 2
};

struct InnerLoops {
  decltype(&attention_detail::scores_scalar) scores;
  decltype(&attention_detail::accumulate_scalar) accumulate;
  decltype(&specdec::softmax) normalize;  // softmax of one query's scores
  decltype(&attention_detail::scores_scalar_f16) scores_f16;
  decltype(&attention_detail::accumulate_scalar_f16) accumulate_f16;
};

InnerLoops inner_loops_for(Isa isa) {
  if (isa == Isa::Avx512)
    return {attention_detail::scores_avx512, attention_detail::accumulate_avx512, attention_detail::softmax_avx512,
            attention_detail::scores_avx512_f16, attention_detail::accumulate_avx512_f16};
  if (isa >= Isa::Avx2)
    return {attention_detail::scores_avx2, attention_detail::accumulate_avx2, attention_detail::softmax_avx2,
            attention_detail::scores_avx2_f16, attention_detail::accumulate_avx2_f16};
  return {attention_detail::scores_scalar, attention_detail::accumulate_scalar, softmax,
          attention_detail::scores_scalar_f16, attention_detail::accumulate_scalar_f16};
}

void validate(const AttentionShape& shape, const AttentionRows& rows) {
  SPECDEC_CHECK(shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0 &&
                    shape.n_heads % shape.n_kv_heads == 0,
                "attention: n_heads " + std::to_string(shape.n_heads) + ", n_kv_heads " +
                    std::to_string(shape.n_kv_heads) + ", head_dim " + std::to_string(shape.head_dim));
  SPECDEC_CHECK(rows.n_rows >= 0 && rows.n_prefix >= 0, "attention: negative row or prefix count");
  if (rows.n_rows == 0) return;
  SPECDEC_CHECK(rows.extra_begin != nullptr && rows.extra_begin[0] == 0, "attention: extra_begin[0] must be 0");
  for (int i = 0; i < rows.n_rows; ++i) {
    const int n_extra = rows.extra_begin[i + 1] - rows.extra_begin[i];
    SPECDEC_CHECK(n_extra >= 0, "attention: extra_begin not increasing at row " + std::to_string(i));
    SPECDEC_CHECK(rows.n_prefix + n_extra > 0, "attention: row " + std::to_string(i) + " sees no keys");
  }
  SPECDEC_CHECK(rows.extra_begin[rows.n_rows] == 0 || rows.extra_slots != nullptr, "attention: extra_slots missing");
}

// One task: query heads [head_begin, head_begin + n_task_heads) of one kv head, for the rows
// [row_begin, row_end). Keys every row of the tile sees at the same logical index (the cached
// prefix, then the leading extras the rows have in common, e.g. a chain's earlier rows) are
// read once for all queries of the task; the rest per row.
void attend_tile(const AttentionShape& shape, const AttentionRows& rows, const InnerLoops& loops,
                 int kv_head, int head_begin, int n_task_heads, int row_begin, int row_end,
                 const float* q, const KvRows& k, const KvRows& v, size_t kv_stride, size_t head_stride, float* out) {
  const int head_dim = shape.head_dim;
  const int n_tile_rows = row_end - row_begin;
  const int n_q = n_tile_rows * n_task_heads;
  const size_t q_row_stride = static_cast<size_t>(shape.n_heads) * head_dim;
  const size_t head_bytes = sizeof(float) * static_cast<size_t>(n_task_heads) * head_dim;
  const size_t kv_offset = static_cast<size_t>(kv_head) * head_stride;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int n_prefix = rows.n_prefix;
  const int* first_extras = rows.extra_slots + rows.extra_begin[row_begin];

  int max_extra = 0;
  int n_shared_extra = rows.extra_begin[row_begin + 1] - rows.extra_begin[row_begin];
  int longest = row_begin;  // the row with the most extras
  for (int r = row_begin; r < row_end; ++r) {
    const int n_extra = rows.extra_begin[r + 1] - rows.extra_begin[r];
    if (n_extra > max_extra) max_extra = n_extra, longest = r;
    const int* extras = rows.extra_slots + rows.extra_begin[r];
    int common = 0;
    while (common < std::min(n_extra, n_shared_extra) && extras[common] == first_extras[common]) ++common;
    n_shared_extra = common;
  }
  // Nested extras (each row's a prefix of the longest row's: a chain, such as a verify's K + 1
  // rows): all of them are read as shared keys, once for all queries. A query's scores past its
  // own visible keys are computed too, then zeroed after its softmax, so that in the weighted V
  // sum they add exact zeros (an output starts at +0 and never holds -0, so out + 0 * v == out
  // for finite v): the same bits as leaving them out. Row by row, the extras of a chain of M rows
  // cost M(M-1)/2 one-key calls per head of scores and as many of sums (the demo target's 5- and
  // 9-row verifies took ~5% longer so, BENCHMARKS 48b).
  const int* longest_extras = rows.extra_slots + rows.extra_begin[longest];
  bool nested = n_shared_extra < max_extra;
  for (int r = row_begin; r < row_end && nested; ++r) {
    const int* extras = rows.extra_slots + rows.extra_begin[r];
    const int n_extra = rows.extra_begin[r + 1] - rows.extra_begin[r];
    for (int e = 0; e < n_extra && nested; ++e) nested = extras[e] == longest_extras[e];
  }
  if (nested) first_extras = longest_extras, n_shared_extra = max_extra;
  const int n_shared = n_prefix + n_shared_extra;  // keys at logical index j < n_shared are common
  auto shared_slot = [&](int j) -> size_t {
    return static_cast<size_t>(j < n_prefix ? j : first_extras[j - n_prefix]);
  };
  const size_t max_visible = static_cast<size_t>(n_prefix) + max_extra;

  thread_local std::vector<float> queries;  // (n_q, head_dim): row-major over (tile row, task head)
  thread_local std::vector<float> outputs;  // (n_q, head_dim)
  thread_local std::vector<float> scores;   // (n_q, max_visible)
  queries.resize(static_cast<size_t>(n_q) * head_dim);
  outputs.assign(static_cast<size_t>(n_q) * head_dim, 0.0f);
  scores.resize(static_cast<size_t>(n_q) * max_visible);

  for (int r = 0; r < n_tile_rows; ++r) {
    const float* src = q + static_cast<size_t>(row_begin + r) * q_row_stride + static_cast<size_t>(head_begin) * head_dim;
    std::memcpy(queries.data() + static_cast<size_t>(r) * n_task_heads * head_dim, src, head_bytes);
  }

  // Scores: the shared keys for all queries, in blocks of kScoreKeyBlock keys, then each row's own
  // remaining extras. Cached rows are kv_stride elements apart: head_dim in the KvCache's
  // head-major layout (a head's keys stream in order), kv_dim in a slot-major one, a stride the
  // hardware prefetchers do not follow across pages. In a strided layout the head's slice
  // kPrefetchAhead keys ahead is prefetched (without it a slot-major long-context decode waited
  // on memory for every key: 2.6 GB/s at 4k keys). Contiguous rows stream in order, which the
  // hardware prefetchers follow; here, prefetches of every key's slice 64 keys ahead into L1
  // only queued behind them (the prefetch instructions held ~14% of a 9-row 4k-key call's
  // samples on a Zen 5 VM, and a 4k-context decode of the 150M model took 12-13 ms per token
  // without them against 14-17 ms with them, BENCHMARKS 23e). The inner loops ask for the rows
  // a little ahead into L2 instead, during their first pass (AVX-512; AVX2 for calls of up to 8
  // queries: attention_simd8.h's prefetch_l2, BENCHMARKS 52b).
  // Key / value pointers of the current block, of the cache's element type (F16 rows are
  // converted inside the inner loops, as they are loaded).
  const bool f16 = k.type == DType::F16;
  const float* block32[kScoreKeyBlock];  // kKeyBlock for the weighted sums
  const uint16_t* block16[kScoreKeyBlock];
  auto put_row = [&](const uint8_t* p, int b) {  // block entry b <- the row at p
    if (f16) {
      block16[b] = reinterpret_cast<const uint16_t*>(p);
    } else {
      block32[b] = reinterpret_cast<const float*>(p);
    }
  };
  auto set_row = [&](const KvRows& rows_of, size_t slot, int b) {
    put_row(rows_of.data + (slot * kv_stride + kv_offset) * rows_of.element_bytes, b);
  };
  auto block_scores = [&](const float* queries_of, int n_queries, int n_keys, float* scores_of) {
    if (f16) {
      loops.scores_f16(queries_of, n_queries, block16, n_keys, head_dim, scale, scores_of, max_visible);
    } else {
      loops.scores(queries_of, n_queries, block32, n_keys, head_dim, scale, scores_of, max_visible);
    }
  };
  auto block_accumulate = [&](const float* weights_of, int n_queries, int n_keys, float* outputs_of) {
    if (f16) {
      loops.accumulate_f16(weights_of, max_visible, n_queries, block16, n_keys, head_dim, outputs_of);
    } else {
      loops.accumulate(weights_of, max_visible, n_queries, block32, n_keys, head_dim, outputs_of);
    }
  };
  const size_t row_slice_bytes = static_cast<size_t>(head_dim) * k.element_bytes;
  const bool contiguous = kv_stride == static_cast<size_t>(head_dim);  // KvCache's head-major layout
  auto shared_block = [&](const KvRows& base, int j0, int n) {
    // Prefix keys are slots j0, j0 + 1, ...: their rows are one add apart (the per-key
    // multiplies of set_row were ~10% of a 1-row 4k-key call).
    const int n_in_prefix = std::clamp(n_prefix - j0, 0, n);
    const size_t row_step = kv_stride * base.element_bytes;
    const uint8_t* p = base.data + (static_cast<size_t>(j0) * kv_stride + kv_offset) * base.element_bytes;
    for (int b = 0; b < n_in_prefix; ++b, p += row_step) put_row(p, b);
    for (int b = n_in_prefix; b < n; ++b) set_row(base, shared_slot(j0 + b), b);
    for (int b = 0; !contiguous && b < n && j0 + b + kPrefetchAhead < n_shared; ++b)
      prefetch_bytes(base.data + (shared_slot(j0 + b + kPrefetchAhead) * kv_stride + kv_offset) * base.element_bytes,
                     row_slice_bytes);
  };
  for (int j = 0; j < n_shared; j += kScoreKeyBlock) {
    const int n = std::min(kScoreKeyBlock, n_shared - j);
    shared_block(k, j, n);
    block_scores(queries.data(), n_q, n, scores.data() + j);
  }
  for (int r = 0; r < n_tile_rows; ++r) {
    const int first = rows.extra_begin[row_begin + r], last = rows.extra_begin[row_begin + r + 1];
    const float* row_queries = queries.data() + static_cast<size_t>(r) * n_task_heads * head_dim;
    float* row_scores = scores.data() + static_cast<size_t>(r) * n_task_heads * max_visible;
    for (int e = first + n_shared_extra; e < last; ++e) {
      set_row(k, static_cast<size_t>(rows.extra_slots[e]), 0);
      block_scores(row_queries, n_task_heads, 1, row_scores + n_prefix + (e - first));
    }
  }
  // Softmax of each query over its own visible keys; zero weights for the shared keys past them
  // (nested extras only).
  for (int r = 0; r < n_tile_rows; ++r) {
    const int n_visible = n_prefix + rows.extra_begin[row_begin + r + 1] - rows.extra_begin[row_begin + r];
    for (int h = 0; h < n_task_heads; ++h) {
      float* query_scores = scores.data() + (static_cast<size_t>(r) * n_task_heads + h) * max_visible;
      loops.normalize(query_scores, n_visible);
      if (n_visible < n_shared) std::fill(query_scores + n_visible, query_scores + n_shared, 0.0f);
    }
  }
  // Weighted sum of V in the same logical order.
  for (int j = 0; j < n_shared; j += kKeyBlock) {
    const int n = std::min(kKeyBlock, n_shared - j);
    shared_block(v, j, n);
    block_accumulate(scores.data() + j, n_q, n, outputs.data());
  }
  for (int r = 0; r < n_tile_rows; ++r) {
    const int first = rows.extra_begin[row_begin + r], last = rows.extra_begin[row_begin + r + 1];
    float* row_outputs = outputs.data() + static_cast<size_t>(r) * n_task_heads * head_dim;
    const float* row_scores = scores.data() + static_cast<size_t>(r) * n_task_heads * max_visible;
    for (int e = first + n_shared_extra; e < last; ++e) {
      set_row(v, static_cast<size_t>(rows.extra_slots[e]), 0);
      block_accumulate(row_scores + n_prefix + (e - first), n_task_heads, 1, row_outputs);
    }
  }
  for (int r = 0; r < n_tile_rows; ++r) {
    float* dst = out + static_cast<size_t>(row_begin + r) * q_row_stride + static_cast<size_t>(head_begin) * head_dim;
    std::memcpy(dst, outputs.data() + static_cast<size_t>(r) * n_task_heads * head_dim, head_bytes);
  }
}

}  // namespace

void attention(const AttentionShape& shape, const AttentionRows& rows, const float* q,
               const float* k, const float* v, size_t kv_stride, float* out, ThreadPool* pool) {
  attention(shape, rows, q, k, v, DType::F32, kv_stride, out, pool);
}

void attention(const AttentionShape& shape, const AttentionRows& rows, const float* q,
               const void* k_data, const void* v_data, DType kv_type, size_t kv_stride, float* out, ThreadPool* pool) {
  attention(shape, rows, q, k_data, v_data, kv_type, kv_stride, static_cast<size_t>(shape.head_dim), out, pool);
}

void attention(const AttentionShape& shape, const AttentionRows& rows, const float* q, const void* k_data,
               const void* v_data, DType kv_type, size_t kv_stride, size_t head_stride, float* out, ThreadPool* pool) {
  SPECDEC_CHECK(kv_type == DType::F32 || kv_type == DType::F16,
                std::string("attention: K/V type ") + dtype_name(kv_type) + " (f32 or f16)");
  const size_t element_bytes = kv_type == DType::F32 ? sizeof(float) : sizeof(uint16_t);
  const KvRows k{static_cast<const uint8_t*>(k_data), kv_type, element_bytes};
  const KvRows v{static_cast<const uint8_t*>(v_data), kv_type, element_bytes};
  validate(shape, rows);
  if (rows.n_rows == 0) return;
  const InnerLoops loops = inner_loops_for(active_isa());
  const int group = shape.n_heads / shape.n_kv_heads;
  // Few rows and kv heads (decoding): also split each group's query heads so every thread
  // has work. Any split gives the same bits: queries are independent.
  // Work floor: below 2 * kMinAttentionTaskWork multiply-adds (scores + weighted V sum over all
  // query heads and visible keys) the call runs on the calling thread. Cost model: the SIMD
  // inner loops do ~12-20 multiply-adds per ns with cached K/V (`specdec_microbench
  // --benchmark_filter=attention/150m`: 5 rows over 16 keys, 9 heads, 8.8 µs on one thread) and
  // far fewer when a layer's K/V come from memory (a forward's attention at short contexts is
  // mostly cache misses), so a task of 2^15 is >= ~2-3 µs, against ~0.5-3 µs for handing a
  // call to a spinning worker. At 2^16 a 5-row verify of the 150M shape ran on the caller alone,
  // ~9-15 µs per layer while 15 threads waited.
  constexpr int64_t kMinAttentionTaskWork = int64_t{1} << 15;
  const int64_t visible_keys = static_cast<int64_t>(rows.n_rows) * rows.n_prefix + rows.extra_begin[rows.n_rows];
  const int64_t work = visible_keys * shape.n_heads * shape.head_dim * 2;
  const bool parallel = pool != nullptr && pool->task_count(work, kMinAttentionTaskWork) > 1;
  const int n_threads = parallel ? pool->size() : 1;
  // Tiles: the count in [M / kRowTile, M / kMinRowTile] (rounded up) whose (tile, kv head) tasks
  // finish first, in rows per thread: ceil(tasks / threads) * rows per tile; ties to fewer tiles.
  // 8 kv heads on 2 threads: one tile of 9 rows (4 tasks of 9 rows each per thread, against 8 of
  // 5); 3 kv heads on 2 threads: 2 tiles (3 tasks of 5 rows per thread, against 2 of 9).
  int n_tiles = (rows.n_rows + kRowTile - 1) / kRowTile;
  int64_t best_span = -1;
  for (int t = n_tiles; t <= (rows.n_rows + kMinRowTile - 1) / kMinRowTile; ++t) {
    const int64_t tasks = static_cast<int64_t>(t) * shape.n_kv_heads;
    const int64_t span = (tasks + n_threads - 1) / n_threads * ((rows.n_rows + t - 1) / t);
    if (best_span < 0 || span < best_span) best_span = span, n_tiles = t;
  }
  int n_head_splits = 1;
  while (n_head_splits < group && n_tiles * shape.n_kv_heads * n_head_splits < n_threads) {
    do { ++n_head_splits; } while (group % n_head_splits != 0);
  }
  const int n_task_heads = group / n_head_splits;
  const int n_tasks = n_tiles * shape.n_kv_heads * n_head_splits;
  // Tiles of equal size (within one row: M = 9 gives 5 + 4, not 8 + 1), so that the tasks of a
  // call take about the same time; the thread pool reads a wait far past the caller's own share
  // as a descheduled worker (a stall) and then runs the next calls on the caller alone.
  auto run_task = [&](int task, int /*thread*/) {
    const int split = task % n_head_splits;
    const int kv_head = task / n_head_splits % shape.n_kv_heads;
    const int tile = task / n_head_splits / shape.n_kv_heads;
    const int row_begin = static_cast<int>(static_cast<int64_t>(rows.n_rows) * tile / n_tiles);
    const int row_end = static_cast<int>(static_cast<int64_t>(rows.n_rows) * (tile + 1) / n_tiles);
    attend_tile(shape, rows, loops, kv_head, kv_head * group + split * n_task_heads, n_task_heads, row_begin,
                row_end, q, k, v, kv_stride, head_stride, out);
  };
  if (!parallel || n_tasks == 1) {
    for (int t = 0; t < n_tasks; ++t) run_task(t, 0);
  } else {
    pool->parallel_for(n_tasks, run_task);
  }
}

}  // namespace specdec
