// The transformers remote-code module of cotan's non-softmax students (nn/hf/*.py, embedded at
// build time by nn/hf/embed.py): save_model_dir writes these files beside such a model's weights.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cotan::nn {

struct RemoteCodeFile {
  std::string_view name;  // "configuration_cotan.py", "modeling_cotan.py"
  std::string_view text;
};

// The files as embedded: modeling_cotan.py's table of kinds is empty (the line `KINDS = {}`).
std::span<const RemoteCodeFile> remote_code_files();

// The table of kinds from the registry (nn/attention_kinds.hpp), as one Python line: each kind's
// Backend core and gate, or None for a kind with a core of its own, which the remote code then
// refuses to load, naming it:
//   KINDS = {"softmax": {"core": "softmax", "gated": False}, ..., "temperature": None}
std::string remote_code_kinds_table();

struct ExportedFile {
  std::string name, text;
};
// The files save_model_dir writes: remote_code_files() with the table filled in. Throws
// "[checkpoint] ..." when modeling_cotan.py has no line `KINDS = {}` to fill.
std::vector<ExportedFile> exported_remote_code();

}  // namespace cotan::nn
