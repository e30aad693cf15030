// cli/progress.h — progress display shared by the commands that write model files.
#pragma once

#include "specdec/make_model.h"

namespace specdec::cli {

// Progress on one rewritten stderr line when stderr is a terminal; nullptr (silent) otherwise.
ModelFileProgress progress_printer();
// Escape sequence that clears the progress line ("" when stderr is not a terminal).
const char* clear_line();

}  // namespace specdec::cli
