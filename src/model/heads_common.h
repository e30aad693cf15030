// model/heads_common.h — validation shared by the Medusa and EAGLE head loaders (internal).
#pragma once

#include <set>
#include <string>

#include "specdec/gguf.h"
#include "specdec/model.h"

namespace specdec {

// Checks general.architecture == arch and specdec.target.fingerprint == the target's
// (Error naming both files and both fingerprints), and `<arch>.embedding_length` == n_embd.
void check_heads_header(const GgufFile& heads, const std::string& arch, const Transformer& target);
// A required integer key >= min_value (Error naming the file, key and value).
int heads_int(const GgufFile& heads, const std::string& key, int min_value);
// Error naming the first tensor of `heads` not in `expected`.
void check_no_unknown_tensors(const GgufFile& heads, const std::set<std::string>& expected);

}  // namespace specdec
