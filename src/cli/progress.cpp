#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace specdec::cli {

ModelFileProgress progress_printer() {
  if (!::isatty(::fileno(stderr))) return nullptr;
  return [](size_t done, size_t total, const std::string& name) {
    std::fprintf(stderr, "\r[%zu/%zu] %-40s", done, total, name.c_str());
    std::fflush(stderr);
  };
}

const char* clear_line() { return ::isatty(::fileno(stderr)) ? "\r\033[K" : ""; }

}  // namespace specdec::cli
