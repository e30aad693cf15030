// specdec/kernels.h — math on buffers: the only layer that knows about SIMD.
//
// Every kernel has a scalar reference and SIMD variants (AVX2, AVX-512) selected by
// active_isa() (specdec/cpu.h). Contracts shared by all kernels:
//  - Batch invariance: the result for one activation row depends only on that row's inputs,
//    never on M, on the row's index, on the other rows or on the thread count. Every
//    reduction has one fixed order per ISA; threads split independent outputs only.
//  - One weight pass: matmul streams each weight block once and applies it to all M rows.
//  - Built with -ffp-contract=off, never -ffast-math. SIMD paths may differ from the scalar
//    reference by rounding (tests state the bound), but each path is deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "specdec/dtype.h"

namespace specdec {

class ThreadPool;

// ---- scalar conversions (IEEE binary16 and bfloat16, round to nearest even)
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);

// ---- (de)quantization of one row of n values (n a multiple of the block size)
// dequantize_row reproduces ggml's reference dequantization bit for bit.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);
// quantize_row implements ggml's reference quantizers (as llama.cpp's quantize without imatrix)
// for every weight type, F32/F16/BF16 included.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// ---- matmul: y = x W^T
// A weight matrix in GGUF layout: n_out rows of n_in values, each row `row_bytes` apart.
// How a matrix's bytes are arranged in memory.
//  - RowMajor: n_out rows of row_bytes, as in the GGUF file (every type, every ISA).
//  - Q8_0Tiles8: a Q8_0 matrix repacked for the SIMD kernels (repack_rows below): tiles of 8
//    rows whose blocks are stored already transposed, so the kernel loads them with aligned
//    vector loads instead of transposing them in registers on every call. row_bytes is still
//    the row-major row size.
//  - Chunks16Tiles8: the same idea for the super-block types Q2_K, Q3_K, Q4_K and Q5_K: each
//    16-byte chunk of 8 rows' blocks stored transposed (layouts in src/kernels/matmul_internal.h).
//  - Q6KTiles8: Q6_K for the AVX2 path: 8-row tiles whose 6-bit values are re-encoded as 3 bytes
//    per 4 values (the file's low-nibble / high-pair split costs more operations to rebuild),
//    with the scales stored per group and d per row: the same bytes per super-block as
//    Chunks16Tiles8 and exactly the file's values (copy_weight_row restores the file's bytes).
//  - Blocks32PairTiles8: the same for the legacy types Q4_0, Q4_1, Q5_0, Q5_1 (n_in a multiple
//    of 64): pairs of blocks per 8-row tile, the nibbles transposed, d, m and qh per row in
//    2-byte units.
//  - Q8_0Tiles16, Chunks16Tiles16, Blocks32PairTiles16, Q6KTiles16 (the AVX-512 path's): 16-row
//    tiles, two 8-row tiles of the Tiles8 form (Blocks32PairTiles16: of the legacy types' pair
//    layout; Q6KTiles16: of Q6KTiles8) interleaved so that each 16-row vector is one 64-byte
//    load and a tile one sequential stream of bytes (decode 15-19% faster than reading two
//    8-row tiles side by side).
//  - FloatRows8 (F32, F16, BF16 with n_in a multiple of 16; both SIMD paths): rows in groups
//    of 8, each group's rows interleaved by chunks of 16 values, so that a decode reads a
//    group as one sequential stream instead of 8 (layout in src/kernels/matmul_internal.h).
// The AVX2 path reads the Tiles8 layouts, the AVX-512 path the Tiles16 ones, both FloatRows8;
// each copies the other's back to row-major order for the call (tests switch ISAs after
// loading), as the scalar path does for every repacked layout.
enum class WeightLayout {
  RowMajor = 0,
  Q8_0Tiles8 = 1,
  Chunks16Tiles8 = 2,
  Blocks32PairTiles16 = 3,
  Q8_0Tiles16 = 4,
  Chunks16Tiles16 = 5,
  FloatRows8 = 6,
  Blocks32PairTiles8 = 7,
  Q6KTiles8 = 8,
  Q6KTiles16 = 9,
};

struct WeightMatrix {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t n_in = 0;    // values per row (GGUF dims[0])
  int64_t n_out = 0;   // rows (GGUF dims[1])
  size_t row_bytes = 0;
  WeightLayout layout = WeightLayout::RowMajor;
};

// ---- repacked weights (src/kernels/repack.cpp)
// Bytes of w's repacked copy for the active ISA, or 0 when w keeps its file layout there (today
// Q8_0 and the K-quants Q2_K to Q6_K on the AVX2 (Tiles8; Q6_K: Q6KTiles8) and AVX-512 (Tiles16; Q6_K: Q6KTiles16) paths have one,
// Q4_0, Q4_1, Q5_0, Q5_1 with n_in a multiple of 64 on both, and F32, F16, BF16
// with n_in a multiple of 16 on both (FloatRows8); the scalar path reads every type in place;
// and 0 for a matrix that is already repacked). Tiles16 layouts round n_out up to whole 16-row
// tiles, the others to 8 (zero rows).
size_t repacked_bytes(const WeightMatrix& w);
// Rows of the repacked layout written together (repack_rows' o_begin is a multiple of this).
constexpr int64_t kRepackTileRows = 8;
// Writes the repacked form of rows [o_begin, o_end) of w (RowMajor, o_begin a multiple of
// kRepackTileRows, o_end a multiple of it or n_out) into dst, a zeroed buffer of
// repacked_bytes(w) bytes aligned to 64. Returns the repacked matrix's view of dst, valid once
// every row is written. The result of matmul() is bit for bit the same with either layout.
// Error when w has no repacked layout here or the range is bad. Cost: O(bytes of the rows).
WeightMatrix repack_rows(const WeightMatrix& w, int64_t o_begin, int64_t o_end, void* dst);
// Byte offset in w's repacked copy (repacked_bytes(w) bytes) at which the tiles of rows o and on
// begin: o a multiple of 16 (a chunk of rows its own repack_rows call writes, for a caller that
// zeroes the buffer chunk by chunk), or n_out (the end). Error for any other o.
size_t repacked_offset(const WeightMatrix& w, int64_t o);
// Copies row o of w (row_bytes bytes, GGUF layout) to dst, whatever w's layout.
void copy_weight_row(const WeightMatrix& w, int64_t o, void* dst);

// x: (M, n_in) row-major, y: (M, n_out) row-major, 1 <= M (any M; register-blocked internally).
// Reads each weight block once for all M rows. Threads split the n_out outputs. A repacked
// matrix used while another ISA is active (tests switch ISAs) is first copied back to row-major
// order for the call: correct, and slow.
// pool may be nullptr (single-threaded).
//
// prologue (optional): computes the input inside the call. prologue(r0, r1) must write rows
// [r0, r1) of x (the caller's buffer, though matmul itself only reads it) from data of those
// rows alone: a layer's rmsnorm before its projections, swiglu before the down projection.
// With a pool, the call's first tasks run it over row ranges, each followed by the
// quantization of the same rows, while the product tasks wait for them; so a verify's
// row-wise steps cost no serial time on the caller before the hand-off (BENCHMARKS 23b). Each
// row's values depend on that row only, so the split changes no bit. With one row task or
// none (a decode row, no pool, below the work floor) the caller runs prologue(0, M) first.
// A non-owning reference to the callable (no allocation per call): pass a lambda, which lives
// until the call returns.
class MatmulPrologue {
 public:
  MatmulPrologue() = default;
  template <typename F>
    requires(!std::is_same_v<std::decay_t<F>, MatmulPrologue>)
  MatmulPrologue(const F& f)  // NOLINT(google-explicit-constructor): a lambda converts
      : callable_(&f), call_([](const void* c, int r0, int r1) { (*static_cast<const F*>(c))(r0, r1); }) {}
  explicit operator bool() const { return call_ != nullptr; }
  void operator()(int r0, int r1) const { call_(callable_, r0, r1); }

 private:
  const void* callable_ = nullptr;
  void (*call_)(const void*, int, int) = nullptr;
};
void matmul(const WeightMatrix& w, const float* x, int M, float* y, ThreadPool* pool,
            const MatmulPrologue& prologue = {});

// Several matmuls of the same activations in one parallel pass: y_i = x W_i^T for every
// (w_i, y_i), each result bit for bit matmul(w_i, x, M, y_i). x is quantized once (when some
// W_i is quantized) and the output chunks of all the matrices form one task list, so a layer's
// Q/K/V (or gate/up) projections cost one hand-off to the pool instead of three (two), which
// matters where a projection is only tens of µs per thread (many threads, small matrices).
// 1 to 8 outputs; every W_i must have the same n_in; y_i must not overlap x or each other.
struct MatmulOutput {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;  // (M, w->n_out)
};
void matmul_group(const MatmulOutput* outputs, int n_outputs, const float* x, int M, ThreadPool* pool,
                  const MatmulPrologue& prologue = {});

// Reference used by tests: dequantize W to f32 and compute each dot product in double.
void matmul_reference(const WeightMatrix& w, const float* x, int M, float* y);

// ---- elementwise / row kernels (fixed order, the same bits on every ISA; cheap next to matmul)
// y = x / sqrt(mean(x^2) + eps) * weight, over n values (reduction in a fixed order: 32 double
// lanes, then a fixed tree).
void rmsnorm(const float* x, const float* weight, int n, float eps, float* y);
// In-place softmax over n values (max-subtracted, fixed-order sum).
void softmax(float* x, int n);
// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int n, float* out);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int n);

// RoPE on one row of n_heads heads of head_dim values, rotating the first n_rot dims of each head.
// layout NORM rotates adjacent pairs (x[2i], x[2i+1]) (Llama); NEOX rotates (x[i], x[i + n_rot/2]).
// theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factors[i] (freq_factors may be nullptr).
enum class RopeLayout { Norm, Neox };
struct RopeParams {
  int n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;          // linear scaling: 1 / factor
  const float* freq_factors = nullptr;  // (n_rot / 2) Llama-3.1 style divisors, or nullptr
  RopeLayout layout = RopeLayout::Norm;
};
void rope(float* x, int n_heads, int head_dim, int pos, const RopeParams& p);
// The same in two steps, so a forward pass computes each row's angles once for all layers:
// rope_cos_sin fills cos_sin (n_rot / 2, 2) for `pos`; rope_apply rotates with it. Together they
// give exactly rope()'s bits. Cost: n_rot / 2 cos+sin, then O(n_heads * n_rot).
void rope_cos_sin(int pos, const RopeParams& p, float* cos_sin);
void rope_apply(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p);

// ---- attention for the M query rows of ONE sequence over that sequence's cache
// Row i sees the cache slots [0, n_prefix) in order, then extra_slots[extra_begin[i] ..
// extra_begin[i+1]) in that order (its ancestors inside the batch, root first, then itself).
// The reduction over visible keys is in that logical order whatever the slot numbers, so a
// tree node and the same path decoded as a chain give identical bits.
struct AttentionRows {
  int n_rows = 0;                  // M
  int n_prefix = 0;
  const int* extra_begin = nullptr;  // (M + 1)
  const int* extra_slots = nullptr;  // (extra_begin[M])
};
struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;   // grouped-query: head h uses kv head h / (n_heads / n_kv_heads)
  int head_dim = 0;
};
// q: (M, n_heads * head_dim); k, v: (n_slots, kv_stride) floats, head g at [g * head_dim, ...);
// out: (M, n_heads * head_dim). Scale 1/sqrt(head_dim). Reads each K/V row once for all M rows
// and all query heads of its group where the rows share it.
void attention(const AttentionShape& shape, const AttentionRows& rows, const float* q,
               const float* k, const float* v, size_t kv_stride, float* out, ThreadPool* pool);
// The same over K/V of kv_type F32 or F16 (kv_stride in elements): F16 values are converted to
// F32 (exactly) as the inner loops load them, so the result is bit for bit that of the F32 call
// on the converted values, for half the bytes read.
void attention(const AttentionShape& shape, const AttentionRows& rows, const float* q,
               const void* k, const void* v, DType kv_type, size_t kv_stride, float* out, ThreadPool* pool);
// The same for any K/V layout: element d of kv head g at slot s is element
// s * slot_stride + g * head_stride + d of k (and v). KvCache stores each kv head's slots
// contiguously (slot_stride = head_dim, head_stride = capacity * head_dim), so a head's keys
// stream from memory in order (one kv head over 4k cold keys, M = 1: 2-2.5x faster than with
// slots 512 floats apart; BENCHMARKS 15f).
void attention(const AttentionShape& shape, const AttentionRows& rows, const float* q, const void* k,
               const void* v, DType kv_type, size_t slot_stride, size_t head_stride, float* out, ThreadPool* pool);

}  // namespace specdec
