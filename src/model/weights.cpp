// model/weights.cpp — locating and validating the tensors of a Llama/Qwen2 GGUF.
#include "model/weights.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/mmap_file.h"
#include "specdec/thread_pool.h"

namespace specdec {

namespace {

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const GgufTensorInfo& require_tensor(const GgufFile& gguf, const std::string& name,
                                     const std::vector<int64_t>& expected_dims) {
  const GgufTensorInfo* t = gguf.find_tensor(name);
  if (t == nullptr) throw Error(gguf.path() + ": missing tensor '" + name + "'");
  // GGUF writers may keep trailing 1-sized dimensions; ignore them.
  std::vector<int64_t> dims = t->dims;
  while (dims.size() > expected_dims.size() && dims.back() == 1) dims.pop_back();
  if (dims != expected_dims) {
    throw Error(gguf.path() + ": tensor '" + name + "' has shape " + dims_string(t->dims) +
                ", expected " + dims_string(expected_dims));
  }
  return *t;
}

}  // namespace

WeightMatrix matrix(const GgufFile& gguf, const std::string& name, int64_t n_in, int64_t n_out) {
  const GgufTensorInfo& t = require_tensor(gguf, name, {n_in, n_out});
  if (!dtype_is_weight_type(t.type)) {
    throw Error(gguf.path() + ": tensor '" + name + "' has type " + dtype_name(t.type) +
                ", which is not supported as a weight");
  }
  WeightMatrix w;
  w.type = t.type;
  w.data = t.data;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = dtype_row_bytes(t.type, n_in);  // Error when n_in is not a multiple of the block
  return w;
}

std::vector<float> vector_f32(const GgufFile& gguf, const std::string& name, int64_t n) {
  const GgufTensorInfo& t = require_tensor(gguf, name, {n});
  std::vector<float> out(static_cast<size_t>(n));  // (n)
  if (t.type == DType::F32) {
    std::memcpy(out.data(), t.data, sizeof(float) * out.size());
  } else if (t.type == DType::F16 || t.type == DType::BF16) {
    dequantize_row(t.type, t.data, out.data(), n);
  } else {
    throw Error(gguf.path() + ": tensor '" + name + "' has type " + dtype_name(t.type) +
                ", expected F32, F16 or BF16");
  }
  return out;
}

LayerWeights load_layer_weights(const GgufFile& gguf, const ModelConfig& c, const std::string& p) {
  LayerWeights lw;
  lw.attn_norm = vector_f32(gguf, p + "attn_norm.weight", c.n_embd);
  lw.wq = matrix(gguf, p + "attn_q.weight", c.n_embd, c.q_dim());
  lw.wk = matrix(gguf, p + "attn_k.weight", c.n_embd, c.kv_dim());
  lw.wv = matrix(gguf, p + "attn_v.weight", c.n_embd, c.kv_dim());
  lw.wo = matrix(gguf, p + "attn_output.weight", c.q_dim(), c.n_embd);
  if (c.qkv_bias) {
    lw.bq = vector_f32(gguf, p + "attn_q.bias", c.q_dim());
    lw.bk = vector_f32(gguf, p + "attn_k.bias", c.kv_dim());
    lw.bv = vector_f32(gguf, p + "attn_v.bias", c.kv_dim());
  }
  lw.ffn_norm = vector_f32(gguf, p + "ffn_norm.weight", c.n_embd);
  lw.w_gate = matrix(gguf, p + "ffn_gate.weight", c.n_embd, c.n_ff);
  lw.w_up = matrix(gguf, p + "ffn_up.weight", c.n_embd, c.n_ff);
  lw.w_down = matrix(gguf, p + "ffn_down.weight", c.n_ff, c.n_embd);
  return lw;
}

std::unique_ptr<Transformer::Weights> Transformer::Weights::load(const GgufFile& gguf,
                                                                 const ModelConfig& c) {
  auto w = std::make_unique<Weights>();
  w->token_embd = matrix(gguf, "token_embd.weight", c.n_embd, c.n_vocab);
  w->output_norm = vector_f32(gguf, "output_norm.weight", c.n_embd);
  w->output = c.tied_output ? w->token_embd : matrix(gguf, "output.weight", c.n_embd, c.n_vocab);
  if (gguf.find_tensor("rope_freqs.weight") != nullptr) {
    w->rope_freqs = vector_f32(gguf, "rope_freqs.weight", c.rope.n_rot / 2);
    for (size_t i = 0; i < w->rope_freqs.size(); ++i) {
      if (!(w->rope_freqs[i] > 0.0f)) {
        throw Error(gguf.path() + ": rope_freqs.weight[" + std::to_string(i) + "] = " +
                    std::to_string(w->rope_freqs[i]) + " must be positive");
      }
    }
  }
  w->layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) w->layers[static_cast<size_t>(l)] = load_layer_weights(gguf, c, "blk." + std::to_string(l) + ".");
  return w;
}

void Transformer::Weights::FreeBytes::operator()(uint8_t* p) const { std::free(p); }

size_t Transformer::Weights::repack(const GgufFile& gguf, ThreadPool& pool) {
  constexpr int64_t kChunkRows = 256;  // rows per task: zeroed, copied, then released from the mapping
  static_assert(kChunkRows % kRepackTileRows == 0 && kChunkRows % 16 == 0);  // repacked_offset: multiples of 16
  size_t total = 0;
  auto repack_one = [&](WeightMatrix& w) {
    const size_t n_bytes = repacked_bytes(w);
    if (n_bytes == 0) return;
    const size_t n_alloc = (n_bytes + 63) / 64 * 64;
    // Matrices of a huge page or more start on one and ask for them: a decode streams each
    // matrix once per token, and 4 KiB pages cost a TLB walk and a page fault per 64 lines
    // (BENCHMARKS 35e: 1B decodes ~5-10% faster, loads ~40% shorter).
    const size_t alignment = n_alloc >= kHugePageBytes ? kHugePageBytes : 64;
    void* p = nullptr;
    if (::posix_memalign(&p, alignment, n_alloc) != 0) p = nullptr;
    std::unique_ptr<uint8_t, FreeBytes> buffer(static_cast<uint8_t*>(p));
    if (!buffer) throw Error(gguf.path() + ": out of memory for " + std::to_string(n_alloc) + " bytes of repacked weights");
    advise_huge_pages(buffer.get(), n_alloc);
    uint8_t* dst = buffer.get();
    std::memset(dst + n_bytes, 0, n_alloc - n_bytes);
    const auto* src = static_cast<const uint8_t*>(w.data);
    const int n_chunks = static_cast<int>((w.n_out + kChunkRows - 1) / kChunkRows);
    WeightMatrix view;  // written by chunk 0; read after the call (which orders it)
    pool.parallel_for(n_chunks, [&](int chunk, int) {
      const int64_t o = chunk * kChunkRows, o_end = std::min(w.n_out, o + kChunkRows);
      const size_t begin = repacked_offset(w, o), end = repacked_offset(w, o_end);
      std::memset(dst + begin, 0, end - begin);
      const WeightMatrix part = repack_rows(w, o, o_end, dst);
      if (chunk == 0) view = part;
      gguf.release_pages(src + o * static_cast<int64_t>(w.row_bytes), static_cast<size_t>(o_end - o) * w.row_bytes);
    });
    // pages straddling two chunks, and any the kernel mapped ahead while the rows were read
    gguf.release_pages(src, static_cast<size_t>(w.n_out) * w.row_bytes);
    w = view;
    repacked.push_back(std::move(buffer));
    total += n_bytes;
  };
  for (LayerWeights& lw : layers) {
    for (WeightMatrix* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) repack_one(*w);
  }
  if (output.data != token_embd.data) {
    repack_one(output);
  } else {  // tied: the output head's matmul reads the repacked copy, embed() its rows
    repack_one(token_embd);
    output = token_embd;
  }
  return total;
}

void Transformer::Weights::release_unread_pages(const GgufFile& gguf) const {
  std::vector<std::pair<const uint8_t*, size_t>> read;  // {data, bytes} of each matrix read in place
  auto keep = [&](const WeightMatrix& m) {
    if (m.layout == WeightLayout::RowMajor)
      read.emplace_back(static_cast<const uint8_t*>(m.data), m.row_bytes * static_cast<size_t>(m.n_out));
  };
  keep(token_embd);
  keep(output);
  for (const LayerWeights& lw : layers)
    for (const WeightMatrix* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) keep(*w);
  gguf.release_pages_except(std::move(read));
}

size_t Transformer::Weights::streamed_bytes() const {
  auto bytes = [](const WeightMatrix& m) { return m.row_bytes * static_cast<size_t>(m.n_out); };
  size_t total = bytes(output) + token_embd.row_bytes;
  for (const LayerWeights& lw : layers) {
    total += bytes(lw.wq) + bytes(lw.wk) + bytes(lw.wv) + bytes(lw.wo) + bytes(lw.w_gate) +
             bytes(lw.w_up) + bytes(lw.w_down);
  }
  return total;
}

void Transformer::Weights::embed(Token token, float* dst) const {
  const auto* row = static_cast<const uint8_t*>(token_embd.data) + static_cast<size_t>(token) * token_embd.row_bytes;
  if (token_embd.layout != WeightLayout::RowMajor) {  // repacked (tied output): the row gathered back
    thread_local std::vector<uint8_t> bytes;          // (row_bytes) the row in GGUF layout
    bytes.resize(token_embd.row_bytes);
    copy_weight_row(token_embd, token, bytes.data());
    row = bytes.data();
  }
  if (token_embd.type == DType::F32) {
    std::memcpy(dst, row, sizeof(float) * static_cast<size_t>(token_embd.n_in));
  } else {
    dequantize_row(token_embd.type, row, dst, token_embd.n_in);
  }
}

}  // namespace specdec
