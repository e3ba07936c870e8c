// The study above the trainer: the teacher cache its students share, its variants, studies run end
// to end (teachers and students from model directories, paired verdicts).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "nn/model_dir.hpp"
#include "study/stats.hpp"
#include "study/study.hpp"
#include "study/teacher_cache.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "tests/train/trainer_fixtures.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace cotan::study;
using namespace cotan::train::testing;
namespace fs = std::filesystem;

TEST_CASE("a teacher cache: found by the ids bit for bit and the kind of output, within its budget") {
  Generator gen(31);
  const Tensor ids = randint({2, 9}, 0, kByteVocab, gen), other = randint({2, 9}, 0, kByteVocab, gen);
  const Tensor out = randn({2, 9, 16}, gen), out2 = randn({2, 9, 16}, gen);
  const int teacher = 0, another = 0;  // teachers are told apart by address
  TeacherCache cache(2 * out.nbytes());
  CHECK_FALSE(cache.find(&teacher, ids, true).defined());
  Tensor written = clone(ids);
  cache.keep(&teacher, written, true, out);
  written.data<int64_t>()[0] += 1;  // the cache keeps its own copy of the ids
  CHECK(cache.find(&teacher, ids, true).same_storage(out));
  CHECK(cache.find(&teacher, clone(ids), true).same_storage(out));  // the values, not the tensor
  CHECK_FALSE(cache.find(&teacher, written, true).defined());
  CHECK_FALSE(cache.find(&teacher, ids, false).defined());  // logits are another output
  CHECK_FALSE(cache.find(&teacher, other, true).defined());
  CHECK_FALSE(cache.find(&teacher, cast(ids, DType::i32), true).defined());  // same values, another dtype
  CHECK_FALSE(cache.find(&teacher, reshape(ids, {9, 2}), true).defined());
  cache.keep(&teacher, ids, true, out2);  // already there: kept once
  CHECK(cache.bytes() == out.nbytes());
  CHECK(cache.find(&teacher, ids, true).same_storage(out));
  cache.keep(&teacher, other, true, out2);
  CHECK(cache.bytes() == 2 * out.nbytes());
  cache.keep(&teacher, ids, false, out);  // over the budget: not kept
  CHECK_FALSE(cache.find(&teacher, ids, false).defined());
  CHECK(cache.bytes() == 2 * out.nbytes());
  CHECK(cache.hits() == 3);
  CHECK(cache.misses() == 7);
  CHECK_THROWS_WITH_AS(cache.find(&another, ids, true), "[train] a teacher cache holds another teacher's outputs",
                       Error);
  CHECK_THROWS_AS(cache.keep(&another, other, true, out), Error);
}

TEST_CASE("students on the same batches share the teacher's passes through a cache, with the same bits") {
  Pair pair;
  TokenData data = corpus();
  for (const bool fused_head : {true, false}) {
    INFO("fused head: ", fused_head);
    TeacherCache cache(size_t(1) << 26);
    Teacher cached = pair.view();
    cached.cache = &cache;
    auto run = [&](nn::AttentionKind kind, const Teacher& teacher, const std::string& dir) {
      nn::CausalLM student(micro(kind));
      Generator gen(5);
      auto [ps, st] = student.init(gen);
      TrainConfig c = config(dir, 12);
      c.eval_every = 4;
      c.fused_head = fused_head;
      fit(student, ps, st, teacher, data, c, false);
      return deterministic_metrics(c.run_dir);
    };
    // The first student fills the cache: 12 steps of 2 micro-batches, and the validation batches
    // at its first evaluation (the later ones find them).
    const std::string first = run(nn::AttentionKind::affine, cached, "cotan_train_cache_first");
    const int64_t misses = cache.misses(), hits = cache.hits();
    CHECK(misses == 24 + 2);  // 12 steps of 2 micro-batches, and the 2 validation batches
    CHECK(hits > 0);
    CHECK(cache.bytes() > 0);
    // A second student finds every batch, runs no teacher pass, and has the bits of a run
    // without the cache.
    const std::string second = run(nn::AttentionKind::softmax, cached, "cotan_train_cache_second");
    CHECK(cache.misses() == misses);
    CHECK(cache.hits() - hits >= 24);
    CHECK(second == run(nn::AttentionKind::softmax, pair.view(), "cotan_train_cache_plain"));
    CHECK(first == run(nn::AttentionKind::affine, pair.view(), "cotan_train_cache_plain"));
  }
}

TEST_CASE("the study's students are the table's kinds, affine once per phi") {
  std::vector<std::string> names, kinds, phis;
  for (const StudyVariant& v : default_variants()) {
    names.push_back(v.name);
    kinds.emplace_back(nn::name_of(v.attention.kind));
    phis.emplace_back(nn::name_of(v.attention.phi));
    CHECK(v.attention.rho == 0.9);
  }
  // The paper's six first; kinds added to the table later come after them.
  REQUIRE(names.size() >= 6);
  auto first_six = [](const std::vector<std::string>& v) { return std::vector<std::string>(v.begin(), v.begin() + 6); };
  CHECK(first_six(names) == std::vector<std::string>{"softmax", "sink", "affine(linear_clip)", "affine(sigmoid)",
                                                     "gated", "affine_gated"});
  CHECK(first_six(kinds) == std::vector<std::string>{"softmax", "sink", "affine", "affine", "gated", "affine_gated"});
  CHECK(first_six(phis) == std::vector<std::string>{"linear_clip", "linear_clip", "linear_clip", "sigmoid",
                                                    "linear_clip", "linear_clip"});
  for (const nn::AttentionKindInfo& k : nn::attention_kinds())
    CHECK(std::count(kinds.begin(), kinds.end(), std::string(k.name)) == (k.study_each_phi ? 2 : 1));
}

namespace {

// The default study's variants of these kinds, in the study's order.
std::vector<StudyVariant> variants_of(std::initializer_list<nn::AttentionKind> kinds) {
  std::vector<StudyVariant> out;
  for (const StudyVariant& v : default_variants())
    if (std::find(kinds.begin(), kinds.end(), v.attention.kind) != kinds.end()) out.push_back(v);
  return out;
}

// A two-step study of tiny models in root: the text corpus, a student config, one variant.
StudyConfig tiny_study(const fs::path& root) {
  fs::remove_all(root);
  fs::create_directories(root);
  std::ofstream(root / "student.json") << micro(nn::AttentionKind::softmax).to_json().dump();
  {
    std::ofstream corpus(root / "corpus.txt");
    for (int i = 0; i < 40; ++i) corpus << "document " << i * 7919 % 1000 << ": the quick brown fox jumps.\n%\n";
  }
  StudyConfig s = quick_study();
  s.data = (root / "corpus.txt").string();
  s.run_dir = (root / "study").string();
  s.cache_dir = (root / "cache").string();
  s.student = (root / "student.json").string();
  s.teacher = (root / "student.json").string();
  s.teacher_steps = 2;
  s.student_steps = 2;
  s.train.seq_len = 16;
  s.train.batch_size = 2;
  s.train.grad_accum = 1;
  s.train.eval_every = 0;
  s.train.log_every = 0;
  s.variants = variants_of({nn::AttentionKind::softmax});
  return s;
}

}  // namespace

TEST_CASE("a study distills from a teacher loaded from a model directory: the teacher's logits are the loaded model's") {
  const fs::path root = fs::temp_directory_path() / "cotan_train_loaded_teacher";
  StudyConfig s = tiny_study(root);
  // A teacher with weights nobody else has: saved as a model directory.
  const nn::ModelConfig tc = micro(nn::AttentionKind::softmax);
  Generator gen(1234);
  auto [tps, tst] = nn::CausalLM(tc).init(gen);
  nn::save_model_dir((root / "teacher").string(), tc, tps, tst);
  s.teacher = (root / "teacher").string();
  s.teacher_steps = 0;
  REQUIRE(s.variants.size() == 1);
  CHECK_FALSE(run_study(s).interrupted);
  CHECK_FALSE(fs::exists(root / "study" / "teacher"));  // nothing pretrained
  CHECK_FALSE(fs::exists(root / "cache"));             // nothing cached
  // The first step's teacher entropy at tau, recomputed from the saved teacher on that step's batch.
  const TokenData data = load_tokens(s.data, 0.05, 0);
  WindowLoader loader(data.train, s.train.seq_len, s.train.batch_size, s.train.seed);
  const Batch batch = loader.next();
  const nn::LoadedModel loaded = nn::load_model_dir((root / "teacher").string());
  nn::State st = nn::CausalLM(loaded.config).init_state();
  st.training = false;
  const std::vector<double> logits =
      nn::CausalLM(loaded.config).apply(batch.inputs, loaded.params, st).first.to_vector<double>();
  const double tau = s.train.loss.temperature;
  const size_t vocab = size_t(tc.vocab_size), rows = logits.size() / vocab;
  double entropy = 0;
  for (size_t r = 0; r < rows; ++r) {
    double top = -1e300, z = 0, ez = 0;
    for (size_t v = 0; v < vocab; ++v) top = std::max(top, logits[r * vocab + v] / tau);
    for (size_t v = 0; v < vocab; ++v) z += std::exp(logits[r * vocab + v] / tau - top);
    for (size_t v = 0; v < vocab; ++v) {
      const double l = logits[r * vocab + v] / tau - top;
      ez += std::exp(l) / z * (l - std::log(z));
    }
    entropy -= ez / double(rows);
  }
  const TrainResult history = read_metrics((root / "study" / s.variants[0].name).string());
  REQUIRE(!history.steps.empty());
  REQUIRE(history.steps[0].teacher_entropy);
  CHECK(*history.steps[0].teacher_entropy == doctest::Approx(entropy).epsilon(1e-5));
  fs::remove_all(root);
}

TEST_CASE("a study's students start from the weights of a model directory; a kind's extra tensors keep their init") {
  const fs::path root = fs::temp_directory_path() / "cotan_train_loaded_student";
  StudyConfig s = tiny_study(root);
  const nn::ModelConfig sc = micro(nn::AttentionKind::softmax);
  Generator gen(4321);
  auto [sps, sst] = nn::CausalLM(sc).init(gen);
  nn::save_model_dir((root / "student").string(), sc, sps, sst);
  s.student = (root / "student").string();
  s.train.schedule.lr = 1e-30;  // updates far below an ulp: the trained weights are the initial ones
  s.train.adamw.weight_decay = 0;
  s.variants = variants_of({nn::AttentionKind::softmax, nn::AttentionKind::sink});
  REQUIRE(s.variants.size() == 2);
  CHECK_FALSE(run_study(s).interrupted);
  for (const StudyVariant& v : s.variants) {
    CAPTURE(v.name);
    const nn::Params trained = nn::load_model_dir((root / "study" / v.name / "model").string()).params;
    for (const auto& [name, t] : sps) CHECK(trained.at(name).to_vector<float>() == t.to_vector<float>());
    CHECK(trained.size() == sps.size() + (v.attention.kind == nn::AttentionKind::sink ? size_t(sc.num_layers) : 0));
  }
  // Unit: a loaded tensor of another shape is an error naming the source.
  nn::Params init = sps, other = sps;
  other["model.norm.weight"] = zeros({3});
  CHECK_THROWS_WITH_AS(nn::take_weights(init, other, "dir"),
                       "[checkpoint] dir: tensor 'model.norm.weight' has shape [3] but the model needs [16]", Error);
  fs::remove_all(root);
}

TEST_CASE("the study's paired verdicts: per-seed differences against softmax, recomputed from the metrics") {
  const fs::path root = fs::temp_directory_path() / "cotan_train_verdicts";
  StudyConfig s = tiny_study(root);
  s.seeds = 2;
  s.student_steps = 12;
  s.variants = variants_of({nn::AttentionKind::softmax, nn::AttentionKind::sink});
  REQUIRE(s.variants.size() == 2);
  CHECK_FALSE(run_study(s).interrupted);
  // The final KD loss of a run: the mean KD of its last 10 steps, from its metrics.jsonl.
  auto final_kd = [&](const std::string& folder) {
    const TrainResult r = read_metrics((root / "study" / folder).string());
    double sum = 0;
    for (size_t i = r.steps.size() - 10; i < r.steps.size(); ++i) sum += r.steps[i].kd.value() / 10;
    return sum;
  };
  std::vector<double> diffs;
  for (int seed = 0; seed < 2; ++seed) {
    const std::string suffix = "-seed" + std::to_string(seed);
    const double sink = final_kd("sink" + suffix), softmax = final_kd("softmax" + suffix);
    diffs.push_back(100 * (sink - softmax) / std::abs(softmax));
  }
  const double mean = (diffs[0] + diffs[1]) / 2, sd = std::abs(diffs[0] - diffs[1]) / std::sqrt(2.0);
  const int lower = (diffs[0] < 0) + (diffs[1] < 0), higher = 2 - lower;
  std::ifstream in(root / "study" / "verdicts.txt");
  std::string line;
  std::getline(in, line);
  const std::string expected = "sink vs softmax: KD loss " + std::string(mean >= 0 ? "+" : "") + format_number(mean, 2) +
                               "% ± " + format_number(sd, 2) + "% (" + std::to_string(mean < 0 ? lower : higher) +
                               "/2 seeds " + (mean < 0 ? "lower" : "higher") + ");";
  CHECK(line.starts_with(expected));
  // table.csv: numbers, a mean and a std column per measure.
  std::ifstream csv(root / "study" / "table.csv");
  std::string header, row;
  std::getline(csv, header);
  CHECK(header.starts_with("attention,delta params,seeds,KD loss mean,KD loss std,val ppl mean,val ppl std,"));
  while (std::getline(csv, row) && !row.starts_with("sink,")) {
  }
  std::vector<std::string> fields;
  for (std::stringstream in_row(row); std::getline(in_row, fields.emplace_back(), ',');) {
  }
  REQUIRE(fields.size() > 4);
  CHECK(fields[0] == "sink");
  CHECK(fields[2] == "2");  // seeds
  const double kd_mean = std::stod(fields[3]);
  CHECK(kd_mean == doctest::Approx((final_kd("sink-seed0") + final_kd("sink-seed1")) / 2).epsilon(1e-12));
  // table.md ends with a legend of its columns.
  std::ifstream md(root / "study" / "table.md");
  const std::string markdown((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  CHECK(markdown.find("- KD loss: mean training KD loss of the last 10 steps\n") != std::string::npos);
  CHECK(markdown.find("Cells are mean ± std over 2 seeds.") != std::string::npos);
  fs::remove_all(root);
}
