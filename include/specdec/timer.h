// specdec/timer.h — monotonic wall-clock seconds.
#pragma once

#include <chrono>

namespace specdec {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace specdec
