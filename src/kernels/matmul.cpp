// matmul(): argument checks, activation quantization, the split of n_out over threads and the
// dispatch to the active ISA's kernels (matmul_scalar.cpp, matmul_avx2.cpp, matmul_avx512.cpp).
// matmul_reference(): dequantize + double-precision dot products, for tests.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/matmul_internal.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "specdec/thread_pool.h"

namespace specdec {

namespace {

using namespace matmul_detail;

// Work floor (ThreadPool::task_count): each task does at least this many multiply-adds, so a
// call below 2x this runs on the calling thread. Cost model: the fastest kernel (AVX-512 VNNI,
// Q8_0/Q4_K, M = 1) does ~30 multiply-adds per ns, so a task is >= ~4 µs, against ~1-3 µs for
// handing a call to a spinning worker (publish, one cache-line transfer per claimed task, the
// worker's first touch of the activations); slower kernels only raise the task time.
constexpr int64_t kMinTaskWork = 1 << 17;
// Tasks of a parallel call shrink towards this floor ("guided" sizes, see plan_tasks): the last
// tasks only decide how far apart the threads finish, and a claim costs ~0.1-0.5 µs (one
// contended cache line) against a task of >= ~2 µs (16 weight rows of 2,048 Q8_0 values
// streamed at one thread's share of the bandwidth).
constexpr int64_t kMinTailWork = kMinTaskWork / 4;
// ... and stream at least this many bytes of weights: at small M a task's time is its weight
// bytes, and 16-row tasks of a 576-wide matrix (10 KB, ~1-2 µs) cost more in claims and
// prefetcher restarts than they save (measured: 150M model, 16 threads, M = 2-9).
constexpr int64_t kMinTailBytes = 32 << 10;
// Input values per row task of a parallel call (prologue and / or quantization: ~0.3-0.5 ns
// each for the quantization, as much again for a norm or swiglu). These tasks are part of the
// call (no hand-off of their own; a claim is ~0.1-0.5 µs), so the floor only keeps a task
// above ~0.5 µs: a 5-row verify's 576-wide inputs (2,880 values) split over 2 tasks.
constexpr int64_t kMinRowTaskValues = 1 << 10;
// A task takes 1 / (kGuidedDivisor * threads) of the work not yet handed out.
constexpr int64_t kGuidedDivisor = 2;
// Thread chunks of n_out are multiples of this many weight rows (a multiple of every tile
// height: 8 on AVX2, 16 on AVX-512, kRepackTileRows).
constexpr int64_t kChunkRows = 16;
static_assert(kChunkRows % kRepackTileRows == 0);

struct ActStorage {
  std::vector<int8_t> values;      // (M, row_stride)
  std::vector<float> scales32;     // (M, row_stride / 32)
  std::vector<float> sums16;       // (M, group_stride)
  std::vector<int32_t> neg128_sums32;  // (M, row_stride / 32)
  std::vector<int32_t> neg32_sums16;   // (M, group_stride)
  std::vector<float> sums32;           // (M, row_stride / 32)
  std::vector<float> scales32_bm;      // (row_stride / 32, M + kAmxActRowSlack)
  std::vector<float> sums32_bm;        // (row_stride / 32, M + kAmxActRowSlack)
};

struct ScratchStorage {
  std::vector<int8_t> q;           // (n_pad)
  std::vector<float> scale16;      // (n_groups_pad)
  std::vector<float> min16;        // (n_groups_pad)
};

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// The calling thread's activation buffers for M rows of n_in values. For a call on AMX (amx)
// also the block-major terms, and kAmxActRowSlack more rows of values and terms, which the AMX
// tiles read and ignore.
QuantizedActs thread_acts(int M, int64_t n_in, bool amx) {
  thread_local ActStorage s;
  QuantizedActs a;
  a.n_pad = padded_values(n_in);
  a.n_groups_pad = padded_groups(n_in);
  a.row_stride = act_row_stride(n_in);
  a.group_stride = act_group_stride(n_in);
  a.values = sized(s.values, (M + (amx ? kAmxActRowSlack : 0)) * a.row_stride);
  a.scales32 = sized(s.scales32, M * a.row_stride / 32);
  a.sums16 = sized(s.sums16, M * a.group_stride);
  a.neg128_sums32 = sized(s.neg128_sums32, M * a.row_stride / 32);
  a.neg32_sums16 = sized(s.neg32_sums16, M * a.group_stride);
  a.sums32 = sized(s.sums32, M * a.row_stride / 32);
  if (amx) {
    a.block_stride = M + kAmxActRowSlack;
    a.scales32_bm = sized(s.scales32_bm, a.block_stride * a.row_stride / 32);
    a.sums32_bm = sized(s.sums32_bm, a.block_stride * a.row_stride / 32);
  }
  return a;
}

// The calling thread's scratch for one unpacked weight row of n_in values.
UnpackedRow thread_scratch(int64_t n_in) {
  thread_local ScratchStorage s;
  const int64_t n_pad = padded_values(n_in), n_groups_pad = padded_groups(n_in);
  UnpackedRow u;
  u.q = sized(s.q, n_pad);
  u.scale16 = sized(s.scale16, n_groups_pad);
  u.min16 = sized(s.min16, n_groups_pad);
  return u;
}

// The calling thread's copy of M rows of n_in values for the blocked float products
// (matmul_internal.h: FloatBlockScratch; acc is left null, each thread sets its own).
FloatBlockScratch thread_float_rows(int M, int64_t n_in) {
  thread_local std::vector<float> x_copy;
  FloatBlockScratch f;
  f.x_stride = float_block_x_stride(n_in);
  float* x0 = sized(x_copy, M * f.x_stride + 16);  // + 16: room to align to 64 bytes
  f.x = x0 + ((64 - reinterpret_cast<uintptr_t>(x0) % 64) % 64) / sizeof(float);
  return f;
}
// Rows [r0, r1) of x (M, n_in) into the copy.
void copy_float_rows(const float* x, int r0, int r1, int64_t n_in, const FloatBlockScratch& f) {
  for (int r = r0; r < r1; ++r)
    std::memcpy(f.x + r * f.x_stride, x + r * n_in, static_cast<size_t>(n_in) * sizeof(float));
}
// The calling thread's accumulators for the blocked float products of M rows.
float* thread_float_acc(int M) {
  thread_local std::vector<float> acc;
  return sized(acc, M * kFloatBlockAccStride);
}

void check_weights(const WeightMatrix& w, int M) {
  if (M < 1) throw Error("matmul: M = " + std::to_string(M) + " activation rows (need >= 1)");
  if (!dtype_is_weight_type(w.type))
    throw Error(std::string("matmul: type ") + dtype_name(w.type) + " (" +
                std::to_string(static_cast<uint32_t>(w.type)) + ") is not a weight type");
  if (w.n_in <= 0 || w.n_out <= 0)
    throw Error("matmul: bad weight shape n_in = " + std::to_string(w.n_in) +
                ", n_out = " + std::to_string(w.n_out));
  const size_t need = dtype_row_bytes(w.type, w.n_in);  // throws for a partial block
  if (w.row_bytes < need)
    throw Error("matmul: row_bytes " + std::to_string(w.row_bytes) + " < " + std::to_string(need) +
                " needed by a " + dtype_name(w.type) + " row of " + std::to_string(w.n_in));
  if (w.data == nullptr) throw Error("matmul: weight data is null");
}

}  // namespace

namespace {

// A repacked matrix while another ISA is active (tests): a row-major copy for the call. The
// AVX2 path reads the Tiles8 layouts, the AVX-512 path the Tiles16 ones, both FloatRows8, the
// scalar path none.
bool needs_row_major_copy(const WeightMatrix& w) {
  if (w.layout == WeightLayout::RowMajor) return false;
  const bool legacy = w.type == DType::Q4_0 || w.type == DType::Q4_1 || w.type == DType::Q5_0 || w.type == DType::Q5_1;
  const bool k_quant = w.type == DType::Q2_K || w.type == DType::Q3_K || w.type == DType::Q4_K || w.type == DType::Q5_K ||
                       w.type == DType::Q6_K;
  bool known = false;
  switch (w.layout) {
    case WeightLayout::Q8_0Tiles16:
    case WeightLayout::Q8_0Tiles8: known = w.type == DType::Q8_0; break;
    case WeightLayout::Chunks16Tiles16:
    case WeightLayout::Chunks16Tiles8: known = k_quant && w.type != DType::Q6_K; break;  // Q6_K: Q6KTiles16 / Q6KTiles8
    case WeightLayout::Q6KTiles16:
    case WeightLayout::Q6KTiles8: known = w.type == DType::Q6_K && w.n_in % 256 == 0; break;
    case WeightLayout::Blocks32PairTiles16:
    case WeightLayout::Blocks32PairTiles8: known = legacy && w.n_in % 64 == 0; break;
    case WeightLayout::FloatRows8: known = is_float_weight(w.type) && w.n_in % kFloatChunkValues == 0; break;
    default: break;
  }
  if (!known || w.row_bytes != dtype_row_bytes(w.type, w.n_in))
    throw Error("matmul: bad repacked matrix (layout " + std::to_string(static_cast<int>(w.layout)) + ", type " +
                dtype_name(w.type) + ")");
  if (w.layout == WeightLayout::FloatRows8) return active_isa() == Isa::Scalar;  // both SIMD paths read it
  return vector_isa(active_isa()) != (is_tiles16(w.layout) ? Isa::Avx512 : Isa::Avx2);
}

void matmul_row_major_copy(const WeightMatrix& w, const float* x, int M, float* y, ThreadPool* pool) {
  std::vector<uint8_t> rows(w.row_bytes * static_cast<size_t>(w.n_out));  // (n_out, row_bytes)
  for (int64_t o = 0; o < w.n_out; ++o) copy_weight_row(w, o, rows.data() + static_cast<size_t>(o) * w.row_bytes);
  WeightMatrix row_major = w;
  row_major.data = rows.data();
  row_major.layout = WeightLayout::RowMajor;
  matmul(row_major, x, M, y, pool);
}

// One task of a call: output rows [o_begin, o_end) of matrix `matrix`.
struct TaskRange {
  int matrix = 0;
  int64_t o_begin = 0, o_end = 0;
};

// The call's task list (the matrices' output rows in order) for n_threads threads, into tasks.
// Guided sizes: each task takes 1 / (kGuidedDivisor * n_threads) of the work not yet handed out,
// at least kMinTailWork and kMinTailBytes of weights, and a multiple of kChunkRows rows. The
// pool hands tasks out in order, so the first ones are large (few claims) and the last ones
// small: threads whose share of the memory bandwidth differs, or that woke up late, still
// finish within about one small task of each other. With equal tasks they finished up to one whole task apart, which at 16 threads
// and M = 1 (2-4 tasks per thread, ~17-35 µs each) idled most threads for 10-20% of a call.
// A pure function of the shapes, M and n_threads; results never depend on it (each output's
// value is the same whichever task computes it).
void plan_tasks(const MatmulOutput* outputs, int n_outputs, int M, int n_threads, std::vector<TaskRange>& tasks) {
  tasks.clear();
  int64_t remaining = 0;
  for (int i = 0; i < n_outputs; ++i) remaining += static_cast<int64_t>(M) * outputs[i].w->n_out * outputs[i].w->n_in;
  for (int i = 0; i < n_outputs; ++i) {
    const WeightMatrix& w = *outputs[i].w;
    const int64_t row_work = static_cast<int64_t>(M) * w.n_in;
    const int64_t row_bytes = static_cast<int64_t>(w.row_bytes);
    const int64_t min_rows = std::max((kMinTailWork + row_work - 1) / row_work, (kMinTailBytes + row_bytes - 1) / row_bytes);
    for (int64_t o = 0; o < w.n_out;) {
      const int64_t guided = (remaining / (kGuidedDivisor * n_threads) + row_work - 1) / row_work;
      const int64_t rows = std::min(w.n_out - o, round_up(std::max(min_rows, guided), kChunkRows));
      tasks.push_back({i, o, o + rows});
      o += rows;
      remaining -= rows * row_work;
    }
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int M, float* y, ThreadPool* pool, const MatmulPrologue& prologue) {
  const MatmulOutput output{&w, y};
  matmul_group(&output, 1, x, M, pool, prologue);
}

void matmul_group(const MatmulOutput* outputs, int n_outputs, const float* x, int M, ThreadPool* pool,
                  const MatmulPrologue& prologue) {
  constexpr int kMaxGroup = 8;
  if (n_outputs < 1 || n_outputs > kMaxGroup || outputs == nullptr)
    throw Error("matmul_group: " + std::to_string(n_outputs) + " outputs (1 to 8)");
  const int64_t n_in = outputs[0].w->n_in;
  bool any_quantized = false, any_float = false, any_copy = false;
  for (int i = 0; i < n_outputs; ++i) {
    const WeightMatrix& w = *outputs[i].w;
    check_weights(w, M);
    if (w.n_in != n_in)
      throw Error("matmul_group: n_in " + std::to_string(w.n_in) + " of output " + std::to_string(i) + " differs from " +
                  std::to_string(n_in));
    any_quantized = any_quantized || !is_float_weight(w.type);
    any_float = any_float || is_float_weight(w.type);
    any_copy = any_copy || needs_row_major_copy(w);
  }
  if (any_copy) {  // tests only: each matrix on its own
    if (prologue) prologue(0, M);
    for (int i = 0; i < n_outputs; ++i) {
      const WeightMatrix& w = *outputs[i].w;
      if (needs_row_major_copy(w)) {
        matmul_row_major_copy(w, x, M, outputs[i].y, pool);
      } else {
        matmul_group(&outputs[i], 1, x, M, pool);
      }
    }
    return;
  }
  void (*quantize_fn)(const float*, int, int64_t, const QuantizedActs&) = quantize_activations;
  const Isa isa = active_isa();
  if (isa == Isa::Avx512) quantize_fn = quantize_activations_avx512;
  if (vector_isa(isa) == Isa::Avx2) quantize_fn = quantize_activations_avx2;
  QuantizedActs acts;
  // AMX (and its block-major activation terms) only when a matrix of the group goes to it.
  bool amx = false;
  if (isa == Isa::Avx512 && M >= kAmxMinRows) {
    const AmxUse use = amx_use();
    for (int i = 0; i < n_outputs; ++i) amx = amx || amx_takes(outputs[i].w->type, use);
  }
  if (any_quantized) acts = thread_acts(M, n_in, amx);
  // Float matrices at prefill-sized M read one aligned copy of the rows, made with the rows'
  // other steps below (BENCHMARKS 45a: it had been made per block of outputs, 9% of the time).
  const bool float_blocked =
      any_float && isa != Isa::Scalar && M >= float_blocked_min_rows(isa) && n_in % 16 == 0;
  FloatBlockScratch float_rows;
  if (float_blocked) float_rows = thread_float_rows(M, n_in);
  void (*range_fn)(const RangeJob&) = matmul_range_scalar;
  Avx2Products avx2_products = Avx2Products::Maddubs;
  switch (isa) {
    case Isa::Avx512: range_fn = amx ? matmul_range_amx : matmul_range_avx512; break;
    case Isa::Avx2Vnni:
      avx2_products = avx_vnni_detected() ? Avx2Products::AvxVnni : Avx2Products::EvexVnni;
      range_fn = matmul_range_avx2;
      break;
    case Isa::Avx2: range_fn = matmul_range_avx2; break;
    case Isa::Scalar: break;
  }

  RangeJob bases[kMaxGroup];  // one per matrix; a task sets its output range
  int64_t total_work = 0;
  for (int i = 0; i < n_outputs; ++i) {
    const WeightMatrix& w = *outputs[i].w;
    RangeJob& b = bases[i];
    b.w = &w;
    b.avx2_products = avx2_products;
    b.x = x;
    b.M = M;
    b.decode_prefetch = decode_prefetch();
    b.verify_prefetch = verify_prefetch();
    b.y = outputs[i].y;
    if (!is_float_weight(w.type)) b.acts = acts;
    if (is_float_weight(w.type)) b.float_blocks = float_rows;
    total_work += static_cast<int64_t>(M) * w.n_out * w.n_in;
  }
  auto run = [&](int matrix, int64_t o_begin, int64_t o_end) {
    RangeJob job = bases[matrix];
    job.o_begin = o_begin;
    job.o_end = o_end;
    if (!is_float_weight(job.w->type)) {
      job.scratch = thread_scratch(job.w->n_in);
    } else if (job.float_blocks.x != nullptr) {
      job.float_blocks.acc = thread_float_acc(M);
    }
    range_fn(job);
  };
  const auto inputs_on_caller = [&] {  // all rows' prologue, quantization and copy, before any product
    if (prologue) prologue(0, M);
    if (any_quantized) quantize_fn(x, M, n_in, acts);
    if (float_blocked) copy_float_rows(x, 0, M, n_in, float_rows);
  };
  if (pool == nullptr || pool->task_count(total_work, kMinTaskWork) < 2) {  // not worth a hand-off
    inputs_on_caller();
    for (int i = 0; i < n_outputs; ++i) run(i, 0, outputs[i].w->n_out);
    return;
  }
  // The input rows are computed (prologue) and quantized (or copied, float_blocked) by the
  // call's first n_rows_tasks tasks (rows split evenly; each row's values and bytes depend on that row only). Every
  // matmul task waits for all of them (spinning): tasks are claimed in order, so a thread that
  // holds a matmul task only waits for row tasks that other threads are already running. At
  // M = 25, n_in = 8,192 the quantization alone is ~100 µs, which on the caller alone left the
  // other threads idle (prefill, large M); at M = 5 on 16 threads the norms, swiglu and
  // quantization of a 150M layer were an estimated ~10 µs on the caller (BENCHMARKS 23b).
  // With fewer than 2 such tasks (a decode row) the caller does that work before the hand-off.
  const int64_t row_values = static_cast<int64_t>(M) * n_in;
  const bool row_steps = any_quantized || float_blocked || static_cast<bool>(prologue);
  int n_rows_tasks =
      row_steps ? static_cast<int>(std::clamp<int64_t>(row_values / kMinRowTaskValues, 0, std::min(M, pool->size()))) : 0;
  if (n_rows_tasks < 2) {
    n_rows_tasks = 0;
    inputs_on_caller();
  }
  thread_local std::vector<TaskRange> caller_tasks;  // reused; the workers get a pointer to it
  plan_tasks(outputs, n_outputs, M, pool->size(), caller_tasks);
  const TaskRange* tasks = caller_tasks.data();  // a thread_local name would be the worker's own
  std::atomic<int> n_rows_done{0};
  pool->parallel_for(n_rows_tasks + static_cast<int>(caller_tasks.size()), [&](int task, int /*thread*/) {
    if (task < n_rows_tasks) {
      const int r0 = M * task / n_rows_tasks, r1 = M * (task + 1) / n_rows_tasks;
      if (prologue) prologue(r0, r1);
      if (any_quantized) quantize_fn(x + static_cast<int64_t>(r0) * n_in, r1 - r0, n_in, acts_from_row(acts, r0));
      if (float_blocked) copy_float_rows(x, r0, r1, n_in, float_rows);
      n_rows_done.fetch_add(1, std::memory_order_release);
      return;
    }
    // Spin (the row tasks take ~0.5-20 µs); yield now and then, so that on an oversubscribed
    // machine a descheduled thread running one gets the core back.
    for (int spins = 1; n_rows_done.load(std::memory_order_acquire) < n_rows_tasks; ++spins) {
      _mm_pause();
      if (spins % 4096 == 0) std::this_thread::yield();
    }
    const TaskRange& t = tasks[task - n_rows_tasks];
    run(t.matrix, t.o_begin, t.o_end);
  });
}

void matmul_reference(const WeightMatrix& w, const float* x, int M, float* y) {
  check_weights(w, M);
  std::vector<float> row(static_cast<size_t>(w.n_in));  // (n_in) one dequantized weight row
  std::vector<uint8_t> bytes(w.row_bytes);              // (row_bytes) the row in GGUF layout
  for (int64_t o = 0; o < w.n_out; ++o) {
    copy_weight_row(w, o, bytes.data());
    dequantize_row(w.type, bytes.data(), row.data(), w.n_in);
    for (int r = 0; r < M; ++r) {
      const float* xr = x + static_cast<int64_t>(r) * w.n_in;
      double sum = 0.0;
      for (int64_t i = 0; i < w.n_in; ++i) sum += static_cast<double>(row[i]) * xr[i];
      y[static_cast<int64_t>(r) * w.n_out + o] = static_cast<float>(sum);
    }
  }
}

}  // namespace specdec
