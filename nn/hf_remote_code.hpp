// The transformers remote-code module of cotan's non-softmax students (nn/hf/*.py, embedded at
// build time by nn/hf/embed.py): save_model_dir writes these files beside such a model's weights.
#pragma once

#include <span>
#include <string_view>

namespace cotan::nn {

struct RemoteCodeFile {
  std::string_view name;  // "configuration_cotan.py", "modeling_cotan.py"
  std::string_view text;
};

std::span<const RemoteCodeFile> remote_code_files();

}  // namespace cotan::nn
