// The Json type without nlohmann-json's full header, for headers that only declare functions
// taking or returning one. Sources that build, read or write JSON include util/json.hpp.
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace cotan {

using Json = nlohmann::ordered_json;

}  // namespace cotan
