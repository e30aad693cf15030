// specdec/sys_memory.h — how much memory this process may still use, for refusing allocations
// that cannot fit (a KV cache sized from a user's context length) with a clear message instead
// of an out-of-memory kill.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace specdec {

// Bytes that can still be allocated without swapping: MemAvailable from /proc/meminfo, lowered
// to the headroom of a cgroup v2 memory limit (memory.max - memory.current) when one applies.
// SPECDEC_MEMORY_LIMIT_MB, when set, replaces the measurement (tests, deliberate overrides).
// Guarantees: nullopt when nothing can be read (the caller then skips its check).
// Cost: reads two or three small files under /proc and /sys.
std::optional<uint64_t> available_memory_bytes();

// "512 B", "3.0 KiB", "1.50 GiB": for messages. Cost: O(1).
std::string format_bytes(uint64_t n_bytes);

}  // namespace specdec
