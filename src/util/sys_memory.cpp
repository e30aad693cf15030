// util/sys_memory.cpp — available memory from /proc/meminfo and the cgroup v2 limit.
#include "specdec/sys_memory.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace specdec {
namespace {

// "MemAvailable:   21161508 kB" -> bytes; nullopt when the line is absent.
std::optional<uint64_t> meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

// One unsigned number in a file ("max" or unreadable: nullopt).
std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::strtoull(word.c_str(), nullptr, 10);
}

// Headroom under this process's cgroup v2 memory limit, when there is one.
std::optional<uint64_t> cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) != 0) continue;  // cgroup v2 entry: "0::/path"
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    const auto max = read_number(dir + "/memory.max");
    const auto current = read_number(dir + "/memory.current");
    if (!max || !current) return std::nullopt;
    return *max > *current ? *max - *current : 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> available_memory_bytes() {
  if (const char* env = std::getenv("SPECDEC_MEMORY_LIMIT_MB"); env && *env)
    return std::strtoull(env, nullptr, 10) * 1024 * 1024;
  std::optional<uint64_t> available = meminfo_available();
  if (const auto headroom = cgroup_headroom(); headroom && (!available || *headroom < *available))
    available = headroom;
  return available;
}

std::string format_bytes(uint64_t n_bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(n_bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n_bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", value, kUnits[unit]);
  return buf;
}

}  // namespace specdec
