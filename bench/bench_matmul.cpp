// specdec_microbench: matmul throughput for the 1B shape's matrices per weight type and M,
// a 1B forward's sequence of matmul calls over 16 layers of distinct weights (layer_calls),
// attention of M chained rows over a 512- and a 4096-key cache (1B shape; F32 and F16 K/V), the verify cost
// curve c(M) = time(M) / time(1) of each, and the machine's read bandwidth.
//
//   specdec_microbench [--threads=N] [--benchmark_filter=REGEX] [--benchmark_min_time=0.2s]
//   SPECDEC_ISA=avx2 specdec_microbench ...   (force a dispatch target)
//
// Column "GB" (shown as a rate, GB/s) counts the weight bytes streamed per second. After the runs a table prints c(M) per
// (type, shape). Numbers are noisy on a shared machine: compare within one run.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/quant_blocks.h"
#include "specdec/bandwidth.h"
#include "specdec/cpu.h"
#include "specdec/kernels.h"
#include "specdec/rng.h"
#include "specdec/thread_pool.h"

namespace {

using namespace specdec;

int g_threads = 0;  // 0 = ThreadPool default (physical cores)

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

ThreadPool& pool() {
  static ThreadPool p(g_threads);
  return p;
}

// The label of every run: the ISA and the thread count.
void set_label(benchmark::State& state) {
  state.SetLabel(std::string(isa_name(active_isa())) + " threads=" + std::to_string(pool().size()));
}

// Every benchmark reports the same counters, which Google Benchmark's CSV reporter requires of
// runs written to one file (a name first seen after the header aborts the program, as a filter
// that mixed matmul and layer_calls runs did): "GB", bytes read per second of wall time (shown
// as a rate), and "GB/cpu_s", per second of the calling thread's CPU time since cpu_start
// (meaningful with --threads=1); and the label.
void report(benchmark::State& state, double bytes_per_iteration, double cpu_start) {
  const double gb = bytes_per_iteration * static_cast<double>(state.iterations()) / 1e9;
  state.counters["GB"] = benchmark::Counter(gb, benchmark::Counter::kIsRate);
  state.counters["GB/cpu_s"] = gb / (thread_cpu_seconds() - cpu_start);
  set_label(state);
}

void set_fp16(uint8_t* block, size_t offset, float v) {
  const uint16_t h = f32_to_fp16(v);
  std::memcpy(block + offset, &h, 2);
}

// Random weights of a type: random bytes with finite binary16 scales (valid for every layout).
struct Weights {
  std::vector<uint8_t> data;  // (n_out, row_bytes)
  WeightMatrix w;
};

const Weights& weights(DType type, int64_t n_out, int64_t n_in) {
  static std::map<std::string, std::unique_ptr<Weights>> cache;
  const std::string key = std::string(dtype_name(type)) + "/" + std::to_string(n_out) + "/" + std::to_string(n_in);
  auto& slot = cache[key];
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  const size_t row_bytes = dtype_row_bytes(type, n_in);
  slot->data.resize(row_bytes * static_cast<size_t>(n_out));
  Rng rng(42);
  for (size_t i = 0; i + 8 <= slot->data.size(); i += 8) {
    const uint64_t v = rng.next_u64();
    std::memcpy(slot->data.data() + i, &v, 8);
  }
  const DTypeInfo& info = dtype_info(type);
  std::vector<size_t> half_offsets;  // binary16 fields of each block
  using namespace quant;
  switch (type) {
    case DType::F16: half_offsets = {0}; break;
    case DType::BF16:
      for (size_t i = 0; i < slot->data.size(); i += 2) {
        const uint16_t b = f32_to_bf16(static_cast<float>(rng.uniform()) - 0.5f);
        std::memcpy(slot->data.data() + i, &b, 2);
      }
      break;
    case DType::F32:
      for (size_t i = 0; i < slot->data.size(); i += 4) {
        const float f = static_cast<float>(rng.uniform()) - 0.5f;
        std::memcpy(slot->data.data() + i, &f, 4);
      }
      break;
    case DType::Q4_0: half_offsets = {offsetof(BlockQ4_0, d)}; break;
    case DType::Q4_1: half_offsets = {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}; break;
    case DType::Q5_0: half_offsets = {offsetof(BlockQ5_0, d)}; break;
    case DType::Q5_1: half_offsets = {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}; break;
    case DType::Q8_0: half_offsets = {offsetof(BlockQ8_0, d)}; break;
    case DType::Q2_K: half_offsets = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}; break;
    case DType::Q3_K: half_offsets = {offsetof(BlockQ3_K, d)}; break;
    case DType::Q4_K: half_offsets = {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}; break;
    case DType::Q5_K: half_offsets = {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}; break;
    case DType::Q6_K: half_offsets = {offsetof(BlockQ6_K, d)}; break;
    default: break;
  }
  for (size_t b = 0; b + static_cast<size_t>(info.type_size) <= slot->data.size(); b += static_cast<size_t>(info.type_size))
    for (size_t off : half_offsets) set_fp16(slot->data.data() + b, off, 0.01f * (static_cast<float>(rng.uniform()) - 0.5f));
  slot->w = WeightMatrix{type, slot->data.data(), n_in, n_out, row_bytes};
  return *slot;
}

// repack: the matrix in its repacked layout (repack_rows), where the active ISA has one.
void bm_matmul(benchmark::State& state, DType type, int64_t n_out, int64_t n_in, int M, bool repack) {
  const Weights& wt = weights(type, n_out, n_in);
  WeightMatrix w = wt.w;
  std::unique_ptr<uint8_t, decltype(&std::free)> repacked(nullptr, &std::free);
  if (repack) {
    const size_t n_bytes = repacked_bytes(w);
    if (n_bytes == 0) {
      state.SkipWithError("no repacked layout for this type on this ISA");
      return;
    }
    repacked.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (n_bytes + 63) / 64 * 64)));
    std::memset(repacked.get(), 0, n_bytes);
    w = repack_rows(w, 0, n_out, repacked.get());
  }
  std::vector<float> x(static_cast<size_t>(M * n_in)), y(static_cast<size_t>(M * n_out));  // (M, n_in), (M, n_out)
  Rng rng(7);
  for (auto& v : x) v = static_cast<float>(rng.uniform()) * 2.0f - 1.0f;
  const double cpu_start = thread_cpu_seconds();
  for (auto _ : state) {
    matmul(w, x.data(), M, y.data(), &pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, static_cast<double>(wt.data.size()), cpu_start);
}

using Buffers = std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>>;

// A copy of the shared (n_out, n_in) matrix of `type` in its own 64-byte-aligned buffer
// (appended to buffers), repacked where the active ISA has a layout for it, so that each copy
// is a distinct weight stream; adds its file bytes to *bytes.
WeightMatrix distinct_copy(DType type, int64_t n_out, int64_t n_in, Buffers& buffers, double* bytes) {
  WeightMatrix w = weights(type, n_out, n_in).w;
  *bytes += static_cast<double>(w.row_bytes) * static_cast<double>(w.n_out);
  const size_t n_bytes = repacked_bytes(w) > 0 ? repacked_bytes(w) : w.row_bytes * static_cast<size_t>(w.n_out);
  buffers.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(64, (n_bytes + 63) / 64 * 64)), &std::free);
  uint8_t* dst = buffers.back().get();
  if (repacked_bytes(w) > 0) {
    std::memset(dst, 0, n_bytes);
    return repack_rows(w, 0, w.n_out, dst);
  }
  std::memcpy(dst, w.data, n_bytes);
  w.data = dst;
  return w;
}

// The matmul calls of a 1B forward of M rows, 16 layers of distinct (repacked) weights of one
// type: per layer the q/k/v group, o, the gate/up group and down, as the model issues them.
// Without the norms, attention and the output layer, so the gap to one large matmul's GB/s is
// the cost of many short calls (thread hand-offs, ramp-up of each new weight stream).
void bm_layer_calls(benchmark::State& state, DType type, int M) {
  constexpr int kLayers = 16;
  const int64_t shapes[5][2] = {{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}};  // q and o, k and v, gate and up, down
  struct Layer {
    Buffers buffers;
    WeightMatrix q, k, v, o, gate, up, down;
  };
  std::vector<Layer> layers(kLayers);
  double bytes = 0.0;
  auto copy_of = [&](Layer& layer, int shape) { return distinct_copy(type, shapes[shape][0], shapes[shape][1], layer.buffers, &bytes); };

  for (Layer& l : layers) {
    l.q = copy_of(l, 0), l.k = copy_of(l, 1), l.v = copy_of(l, 1), l.o = copy_of(l, 0);
    l.gate = copy_of(l, 2), l.up = copy_of(l, 2), l.down = copy_of(l, 3);
  }
  std::vector<float> x(static_cast<size_t>(M) * 8192);                      // (M, 8192) every call's input
  std::vector<float> y0(static_cast<size_t>(M) * 8192), y1(y0.size()), y2(y0.size());  // (M, n_out) outputs
  Rng rng(7);
  for (auto& e : x) e = static_cast<float>(rng.uniform()) * 2.0f - 1.0f;
  const double cpu_start = thread_cpu_seconds();
  for (auto _ : state) {
    for (const Layer& l : layers) {
      const MatmulOutput qkv[3] = {{&l.q, y0.data()}, {&l.k, y1.data()}, {&l.v, y2.data()}};
      matmul_group(qkv, 3, x.data(), M, &pool());
      matmul(l.o, x.data(), M, y0.data(), &pool());
      const MatmulOutput gate_up[2] = {{&l.gate, y0.data()}, {&l.up, y1.data()}};
      matmul_group(gate_up, 2, x.data(), M, &pool());
      matmul(l.down, x.data(), M, y2.data(), &pool());
    }
    benchmark::DoNotOptimize(y2.data());
    benchmark::ClobberMemory();
  }
  report(state, bytes, cpu_start);
}

// One shape's matmul called over n_copies distinct repacked copies in turn (M = 1): a call's
// weights come from memory, as in a forward, and the call length is the shape's. Against
// layer_calls (four shapes) and the one long 32000x2048 call, this separates the cost of a
// call boundary from the cost of each shape's kernel.
void bm_calls_from_memory(benchmark::State& state, DType type, int64_t n_out, int64_t n_in, int n_copies) {
  Buffers buffers;
  std::vector<WeightMatrix> copies;
  double bytes = 0.0;
  for (int c = 0; c < n_copies; ++c) copies.push_back(distinct_copy(type, n_out, n_in, buffers, &bytes));
  std::vector<float> x(static_cast<size_t>(n_in)), y(static_cast<size_t>(n_out));  // (1, n_in), (1, n_out)
  Rng rng(7);
  for (auto& e : x) e = static_cast<float>(rng.uniform()) * 2.0f - 1.0f;
  const double cpu_start = thread_cpu_seconds();
  for (auto _ : state) {
    for (const WeightMatrix& w : copies) matmul(w, x.data(), 1, y.data(), &pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, bytes, cpu_start);
}

// Attention of M chained rows (a verify chain: row r also sees rows 0..r-1 as extras) over a
// cached prefix of n_prefix keys, F32 or F16 K/V; shape 1B (32 heads, 8 kv heads, head_dim 64)
// or 150M (9 heads, 3 kv heads, head_dim 64). K/V in KvCache's layout: each kv head's slots
// contiguous (until 2026-11-27 slot-major: a head's keys kv_dim apart, another access pattern).
// n_layers > 1: that many K/V copies, a different one each call, as a forward's layers: K/V
// then stream from memory (a 4k-key 150M layer is 6 MiB; 30 of them exceed the L3 cache).
void bm_attention(benchmark::State& state, AttentionShape shape, int n_prefix, int M, DType kv_type, int n_layers) {
  const size_t kv_stride = static_cast<size_t>(shape.n_kv_heads) * shape.head_dim;
  const size_t n_slots = static_cast<size_t>(n_prefix + M);
  const size_t slot_stride = static_cast<size_t>(shape.head_dim), head_stride = n_slots * shape.head_dim;
  std::vector<float> k(n_slots * kv_stride), v(n_slots * kv_stride);  // (n_kv_heads, n_slots, head_dim)
  std::vector<float> q(static_cast<size_t>(M) * shape.n_heads * shape.head_dim), out(q.size());  // (M, n_heads * head_dim)
  Rng rng(11);
  for (auto* buf : {&k, &v, &q})
    for (auto& x : *buf) x = static_cast<float>(rng.uniform()) * 2.0f - 1.0f;
  std::vector<int> extra_begin(static_cast<size_t>(M) + 1), extra_slots;  // row r: slots n_prefix .. n_prefix + r
  for (int r = 0; r < M; ++r) {
    extra_begin[static_cast<size_t>(r)] = static_cast<int>(extra_slots.size());
    for (int e = 0; e <= r; ++e) extra_slots.push_back(n_prefix + e);
  }
  extra_begin[static_cast<size_t>(M)] = static_cast<int>(extra_slots.size());
  const AttentionRows rows{M, n_prefix, extra_begin.data(), extra_slots.data()};
  std::vector<uint16_t> k16(k.size()), v16(v.size());  // (n_kv_heads, n_slots, head_dim), F16 K/V
  quantize_row(DType::F16, k.data(), k16.data(), static_cast<int64_t>(k.size()));
  quantize_row(DType::F16, v.data(), v16.data(), static_cast<int64_t>(v.size()));
  const bool f16 = kv_type == DType::F16;
  std::vector<std::vector<float>> k_layers, v_layers;  // (n_layers, ...) copies of k, v: F32 only
  if (n_layers > 1 && !f16) k_layers.assign(static_cast<size_t>(n_layers), k), v_layers.assign(static_cast<size_t>(n_layers), v);
  size_t layer = 0;
  const double cpu_start = thread_cpu_seconds();
  for (auto _ : state) {
    const float* k_of = k_layers.empty() ? k.data() : k_layers[layer].data();
    const float* v_of = v_layers.empty() ? v.data() : v_layers[layer].data();
    if (!k_layers.empty()) layer = (layer + 1) % k_layers.size();
    attention(shape, rows, q.data(), f16 ? static_cast<const void*>(k16.data()) : k_of,
              f16 ? static_cast<const void*>(v16.data()) : v_of, kv_type, slot_stride, head_stride, out.data(),
              &pool());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double kv_bytes = 2.0 * static_cast<double>(n_prefix) * static_cast<double>(kv_stride) * (f16 ? 2.0 : 4.0);
  report(state, kv_bytes, cpu_start);
}

void bm_bandwidth(benchmark::State& state) {
  double gbs = 0.0;
  for (auto _ : state) gbs = measure_read_bandwidth_gbs(pool(), size_t{1} << 30, 5);
  // The probe's best pass, in the counters the other benchmarks fill (report()): "GB" is its
  // GB/s, not a rate over this run's wall time (five passes and the buffer's first touch).
  state.counters["GB"] = gbs;
  state.counters["GB/cpu_s"] = gbs;
  set_label(state);
}

// Console output plus the c(M) table at the end.
class CurveReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      const std::string name = run.benchmark_name();
      const size_t m_pos = name.rfind("/M:");
      if (m_pos != std::string::npos && !run.error_occurred)
      {
        const int m = std::stoi(name.substr(m_pos + 3));
        times_[name.substr(0, m_pos)][m] = run.GetAdjustedRealTime();
        cpu_times_[name.substr(0, m_pos)][m] = run.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void PrintCurves() const {
    PrintTable(times_, "wall time");
    // With one thread, CPU time is the steadier signal on a shared machine.
    if (pool().size() == 1) PrintTable(cpu_times_, "CPU time");
  }

 private:
  static void PrintTable(const std::map<std::string, std::map<int, double>>& times, const char* what) {
    std::printf("\nverify cost c(M) = time(M) / time(1) by %s  [%s, %d threads]\n", what, isa_name(active_isa()),
                pool().size());
    for (const auto& [key, by_m] : times) {
      auto one = by_m.find(1);
      if (one == by_m.end()) continue;
      std::printf("  %-32s", key.c_str());
      for (const auto& [m, t] : by_m) std::printf("  c(%d)=%.2f", m, t / one->second);
      std::printf("\n");
    }
  }

  std::map<std::string, std::map<int, double>> times_;      // real time by benchmark and M
  std::map<std::string, std::map<int, double>> cpu_times_;  // CPU time by benchmark and M
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      g_threads = std::atoi(argv[i] + 10);
    } else {
      args.push_back(argv[i]);
    }
  }
  int n_args = static_cast<int>(args.size());
  benchmark::Initialize(&n_args, args.data());
  if (benchmark::ReportUnrecognizedArguments(n_args, args.data())) return 1;

  benchmark::RegisterBenchmark("read_bandwidth", bm_bandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                         DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  // {n_out, n_in}: the 1B shape's matrices, plus 256x2048 whose weights stay in L2 (compute cost
  // without the memory wall: the steadiest signal for kernel changes on a busy machine), and
  // the 1B output matrix 32000x2048, larger than a 32 MiB L3 in every type but Q2_K and Q3_K
  // (M = 1 streams it from memory, like decode), and the 150M shape's gate / up matrix 1536x576
  // (576-wide rows: legacy types, Q8_0 and floats only; 0.6-1.3 MiB, L2-sized).
  const int64_t shapes[][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}, {256, 2048}, {32000, 2048}, {1536, 576}};
  for (DType type : types) {
    for (const auto& shape : shapes) {
      if (shape[1] % dtype_info(type).block_size != 0) continue;
      for (int M : {1, 5, 9, 17, 32, 64}) {  // 64: prefill's chunk
        const std::string name = std::string("matmul/") + dtype_name(type) + "/" + std::to_string(shape[0]) + "x" +
                                 std::to_string(shape[1]) + "/M:" + std::to_string(M);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, type, shape[0], shape[1], M, false)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
        {
          // the repacked layout where the active ISA has one (an error row elsewhere: the scalar
          // path; the legacy 32-value types on AVX2)
          const std::string repacked = std::string("matmul/") + dtype_name(type) + "-repacked/" + std::to_string(shape[0]) + "x" +
                                       std::to_string(shape[1]) + "/M:" + std::to_string(M);
          benchmark::RegisterBenchmark(repacked.c_str(), bm_matmul, type, shape[0], shape[1], M, true)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    // ~300-600 MB of copies per shape: well past the L3
    const int64_t calls_shapes[][3] = {{2048, 2048, 128}, {8192, 2048, 32}, {2048, 8192, 32}, {32000, 2048, 8}};
    for (const auto& cs : calls_shapes) {
      const std::string name = std::string("calls_from_memory/") + dtype_name(type) + "/" + std::to_string(cs[0]) + "x" +
                               std::to_string(cs[1]) + "/copies:" + std::to_string(cs[2]);
      benchmark::RegisterBenchmark(name.c_str(), bm_calls_from_memory, type, cs[0], cs[1], static_cast<int>(cs[2]))
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    for (int M : {1, 2, 5, 9}) {
      const std::string name = std::string("layer_calls/") + dtype_name(type) + "/M:" + std::to_string(M);
      benchmark::RegisterBenchmark(name.c_str(), bm_layer_calls, type, M)->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }
  for (DType kv_type : {DType::F32, DType::F16}) {
    for (int n_prefix : {512, 4096}) {
      for (int M : {1, 5, 9, 17}) {
        const std::string name = std::string(kv_type == DType::F16 ? "attention_f16" : "attention") +
                                 "/prefix:" + std::to_string(n_prefix) + "/M:" + std::to_string(M);
        benchmark::RegisterBenchmark(name.c_str(), bm_attention, AttentionShape{32, 8, 64}, n_prefix, M, kv_type, 1)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  // The 1B shape's 16 layers at 4,096 keys (256 MiB of F32 K/V), one call per layer in turn, as
  // a long-context forward reads them: from memory.
  for (int M : {1, 5, 9}) {
    const std::string name = "attention/memory/prefix:4096/M:" + std::to_string(M);
    benchmark::RegisterBenchmark(name.c_str(), bm_attention, AttentionShape{32, 8, 64}, 4096, M, DType::F32, 16)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  // The 150M shape at the bench's short context (16 cached keys): a verify's attention there is
  // all fixed costs, one call per layer; and at its long one (4,096 keys, attention-bound), with
  // K/V from the cache and, like a forward (30 layers), from memory.
  for (int n_prefix : {16, 512, 4096}) {
    for (int n_layers : {1, 30}) {
      if (n_layers > 1 && n_prefix < 4096) continue;
      for (int M : {1, 5, 9}) {
        const std::string name = std::string("attention/150m/") + (n_layers > 1 ? "memory/" : "") +
                                 "prefix:" + std::to_string(n_prefix) + "/M:" + std::to_string(M);
        benchmark::RegisterBenchmark(name.c_str(), bm_attention, AttentionShape{9, 3, 64}, n_prefix, M, DType::F32, n_layers)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  CurveReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintCurves();
  benchmark::Shutdown();
  return 0;
}
