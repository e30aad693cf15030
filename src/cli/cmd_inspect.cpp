// cli/cmd_inspect.cpp — `specdec inspect MODEL.gguf [--items N] [--no-tensors]`: prints the
// GGUF version, every metadata entry (arrays abbreviated to their first N items and a count)
// and the tensor table (name, type, dims, data offset, bytes), then totals per type.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec::cli {
namespace {

struct InspectOptions {
  std::string model;
  size_t max_items = 6;
  bool no_tensors = false;
};

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// "1.13 MiB" style sizes next to exact byte counts.
std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(n);
  int u = 0;
  while (x >= 1024.0 && u < 4) {
    x /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", x, units[u]);
  return buf;
}

void run_inspect(const InspectOptions& opt) {
  auto f = GgufFile::open(opt.model);
  const uint64_t file_size = std::filesystem::file_size(opt.model);
  std::printf("file: %s (%llu bytes, %s)\n", opt.model.c_str(),
              static_cast<unsigned long long>(file_size), human_bytes(file_size).c_str());
  std::printf("GGUF version %u, alignment %llu, %zu metadata entries, %zu tensors\n",
              f->version(), static_cast<unsigned long long>(f->alignment()), f->metadata().size(),
              f->tensors().size());

  std::printf("\nmetadata:\n");
  size_t key_width = 0;
  for (const auto& [key, value] : f->metadata()) key_width = std::max(key_width, key.size());
  for (const auto& [key, value] : f->metadata()) {
    std::printf("  %-*s  %-16s %s\n", static_cast<int>(key_width), key.c_str(),
                gguf_value_type_description(value).c_str(),
                gguf_value_to_string(value, opt.max_items).c_str());
  }

  struct TypeTotal { size_t n_tensors = 0; int64_t n_elements = 0; uint64_t n_bytes = 0; };
  std::map<std::string, TypeTotal> per_type;
  TypeTotal total;
  size_t name_width = 4;
  for (const auto& t : f->tensors()) name_width = std::max(name_width, t.name.size());
  if (!opt.no_tensors && !f->tensors().empty()) {
    std::printf("\ntensors:\n");
    std::printf("  %5s  %-*s  %-5s  %-22s %12s %12s\n", "#", static_cast<int>(name_width), "name",
                "type", "dims", "offset", "bytes");
  }
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    if (!opt.no_tensors) {
      std::printf("  %5zu  %-*s  %-5s  %-22s %12llu %12llu\n", i, static_cast<int>(name_width),
                  t.name.c_str(), dtype_name(t.type), dims_text(t.dims).c_str(),
                  static_cast<unsigned long long>(t.offset),
                  static_cast<unsigned long long>(t.n_bytes));
    }
    TypeTotal& tt = per_type[dtype_name(t.type)];
    for (TypeTotal* x : {&tt, &total}) {
      x->n_tensors += 1;
      x->n_elements += t.n_elements();
      x->n_bytes += t.n_bytes;
    }
  }

  std::printf("\ntotal: %zu tensors, %lld parameters, %llu bytes (%s) of tensor data\n",
              total.n_tensors, static_cast<long long>(total.n_elements),
              static_cast<unsigned long long>(total.n_bytes), human_bytes(total.n_bytes).c_str());
  for (const auto& [name, tt] : per_type) {
    std::printf("  %-5s %4zu tensors %12lld parameters %12llu bytes\n", name.c_str(), tt.n_tensors,
                static_cast<long long>(tt.n_elements), static_cast<unsigned long long>(tt.n_bytes));
  }
}

void setup_inspect(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensor table");
  cmd->add_option("model", opt->model, "GGUF file")->required();
  cmd->add_option("--items", opt->max_items, "array items shown per metadata array (default 6)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--no-tensors", opt->no_tensors, "omit the per-tensor table (totals only)");
  cmd->callback([opt]() { run_inspect(*opt); });
}

}  // namespace

SPECDEC_COMMAND("inspect", setup_inspect);

}  // namespace specdec::cli
