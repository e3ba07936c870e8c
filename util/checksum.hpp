// File checksums: XXH3-64 (libxxhash) of a file's bytes, recorded when a checkpoint or a model
// directory is written and verified when it is read, so a flipped bit is an error naming the file.
//
// The manifest is a JSON object, one member per file of a directory:
//   {"model.safetensors": {"bytes": 1048584, "xxh3_64": "9f86d081884c7d65"}, ...}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/json_fwd.hpp"

namespace cotan {

struct FileChecksum {
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
};

// Reads the whole file; "[op] path: cannot read: reason".
FileChecksum checksum_file(const std::string& path, std::string_view op);

// The manifest of `files` (names relative to dir).
Json checksum_manifest(const std::string& dir, const std::vector<std::string>& files, std::string_view op);

// Checks every file the manifest names, in dir; `source` is the file holding the manifest.
// Errors: "[op] dir/model.safetensors: checksum mismatch (XXH3-64 is 0123..., source recorded
// 4567...): the file is corrupted", "... is 100 bytes, source recorded 200", "... missing".
void verify_manifest(const std::string& dir, const Json& manifest, std::string_view op, const std::string& source);

}  // namespace cotan
