// specdec/error.h — how the library reports failure.
//
// Contract: library code never calls exit() or abort(). User input and I/O problems throw
// specdec::Error whose message names the offending value (file, key, token id, size...).
// Broken internal invariants throw specdec::InternalError through SPECDEC_CHECK, which stays
// on in Release builds. Frontends (cli, server) catch both and turn them into messages.
#pragma once

#include <stdexcept>
#include <string>

namespace specdec {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

[[noreturn]] void fail_check(const char* expr, const char* file, int line, const std::string& message);

}  // namespace specdec

// Invariant check, on in every build type. `message` is any expression convertible to std::string.
#define SPECDEC_CHECK(cond, message)                                                   \
  do {                                                                                 \
    if (!(cond)) ::specdec::fail_check(#cond, __FILE__, __LINE__, (message));          \
  } while (0)
