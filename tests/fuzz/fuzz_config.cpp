// Fuzzes the JSON parser (util/json.cpp) and config.json reading (nn/config.cpp): the input is a
// config.json. Any JSON the parser accepts must dump and parse back to an equal value; a config
// ModelConfig::from_json accepts must validate, and its to_json must read back to the same config.
#include "nn/config.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "util/json.hpp"

using namespace cotan;
using cotan::fuzz::accepts;
using cotan::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Json json;
  if (!accepts([&] { json = parse_json({reinterpret_cast<const char*>(data), size}); })) return 0;
  Json reparsed;
  require(accepts([&] { reparsed = parse_json(dump_json(json)); }), "dumped JSON parses");
  require(json_equal(json, reparsed), "dumped JSON parses to an equal value");
  require(accepts([&] { parse_json(dump_json(json, 2)); }), "indented JSON parses");

  nn::ModelConfig config;
  if (!accepts([&] { config = nn::ModelConfig::from_json(json, "config.json"); })) return 0;
  require(accepts([&] { config.validate("config.json"); }), "a config from_json returns validates");
  const Json written = config.to_json();
  nn::ModelConfig again;
  require(accepts([&] { again = nn::ModelConfig::from_json(parse_json(dump_json(written)), "written"); }),
          "to_json's config reads back");
  require(json_equal(again.to_json(), written), "to_json's config reads back to the same config");
  return 0;
}
