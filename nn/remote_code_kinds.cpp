// The remote code's table of attention kinds, written from the registry when a model is exported.
#include "nn/attention_kinds.hpp"
#include "nn/hf_remote_code.hpp"
#include "tensor/error.hpp"

namespace cotan::nn {

std::string remote_code_kinds_table() {
  std::string out;
  // Names are letters, digits and '_' (register_attention_kind checks): safe in a Python string.
  for (const AttentionKindInfo& k : attention_kinds()) {
    out += cat(out.empty() ? "" : ", ", "\"", k.name, "\": ");
    out += k.core ? cat("{\"core\": \"", core_kind_name(*k.core), "\", \"gated\": ", k.gated ? "True" : "False", "}")
                  : std::string("None");
  }
  return cat("KINDS = {", out, "}");
}

std::vector<ExportedFile> exported_remote_code() {
  constexpr std::string_view kEmptyTable = "\nKINDS = {}\n";
  std::vector<ExportedFile> out;
  for (const RemoteCodeFile& f : remote_code_files()) {
    ExportedFile& file = out.emplace_back(ExportedFile{std::string(f.name), std::string(f.text)});
    if (f.name != "modeling_cotan.py") continue;
    const size_t at = file.text.find(kEmptyTable);
    if (at == std::string::npos) fail("checkpoint", f.name, " has no line 'KINDS = {}' for the table of attention kinds");
    file.text.replace(at + 1, kEmptyTable.size() - 2, remote_code_kinds_table());
  }
  return out;
}

}  // namespace cotan::nn
