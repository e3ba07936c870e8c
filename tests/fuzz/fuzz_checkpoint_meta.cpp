// Fuzzes what a resume reads from a run directory besides the tensors: trainer.json's loader
// state (LoaderState, train/data_loader.cpp) and metrics.jsonl rows (MetricsRecord,
// train/metrics.cpp). The input is read both ways: as a whole, as trainer.json, and line by
// line, as metrics.jsonl. The resume itself (read_checkpoint) is internal to train/trainer.cpp;
// the harness calls the public pieces it is made of, in its order.
//
// A loader state from_json accepts must restore the loader of the tokens it was saved for (or be
// refused with an error) and round-trip through to_json; a metrics row from_json accepts must
// read back from its to_json to the same row.
#include "nn/config.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::train;
using cotan::fuzz::accepts;
using cotan::fuzz::require;

namespace {

void read_trainer_json(const Json& meta) {
  static const Json model_config = nn::preset("tiny-student").to_json();
  static const Json settings = train_settings(TrainConfig{}, false);
  static const TokenSequence tokens(fuzz::loader_tokens());

  const JsonFields f(meta, "resume", "trainer.json");
  if (const Json& saved = member(meta, "model_config"); !json_equal(saved, model_config))
    describe_differences(saved, model_config, "in the checkpoint");
  if (const Json& saved = member(meta, "train"); !json_equal(saved, settings))
    describe_differences(saved, settings, "in the checkpoint");
  f.required<int64_t>("step");
  f.required<int64_t>("optimizer_steps");

  const LoaderState state = LoaderState::from_json(member(meta, "loader"));
  require(LoaderState::from_json(state.to_json()) == state, "a loader state round-trips through to_json");
  WindowLoader loader(tokens, fuzz::kLoaderSeqLen, fuzz::kLoaderBatch, 0);
  loader.restore(state);
  require(loader.state() == state, "a restored loader is in the state it was given");
  loader.next();
}

void read_metrics_line(std::string_view line, int number) {
  const std::string source = cat("metrics.jsonl line ", number);
  const MetricsRecord row = MetricsRecord::from_json(parse_json(line), source);
  const Json written = row.to_json();
  MetricsRecord again;
  require(accepts([&] { again = MetricsRecord::from_json(parse_json(dump_json(written)), source); }),
          "a metrics row's to_json reads back");
  require(json_equal(again.to_json(), written), "a metrics row reads back to the same row");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Json meta;
  if (accepts([&] { meta = parse_json(text); })) accepts([&] { read_trainer_json(meta); });

  int number = 1;
  for (size_t begin = 0; begin < text.size(); ++number) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    if (end > begin) accepts([&] { read_metrics_line(text.substr(begin, end - begin), number); });
    begin = end + 1;
  }
  return 0;
}
