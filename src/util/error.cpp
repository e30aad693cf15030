#include "specdec/error.h"

namespace specdec {

void fail_check(const char* expr, const char* file, int line, const std::string& message) {
  throw InternalError(std::string("internal check failed: ") + expr + " at " + file + ":" +
                      std::to_string(line) + (message.empty() ? "" : ": " + message));
}

}  // namespace specdec
