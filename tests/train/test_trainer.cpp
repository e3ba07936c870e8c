// The training loop: determinism, bit-for-bit resume, NaN handling and bad input.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "tests/train/trainer_fixtures.hpp"
#include "train/run_dir.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace cotan::train::testing;
namespace fs = std::filesystem;

namespace {
// A teacher and a student large enough that the products inside both passes spread over two
// threads; `gen` goes on to draw the batches.
nn::ModelConfig threaded_config(nn::AttentionKind kind, int64_t hidden, int64_t heads, int64_t inter, int64_t layers) {
  nn::ModelConfig c = micro(kind);
  c.hidden_size = hidden, c.num_heads = heads, c.num_kv_heads = 2, c.intermediate_size = inter, c.num_layers = layers;
  return c;
}
struct ThreadedPair {
  nn::CausalLM teacher{threaded_config(nn::AttentionKind::softmax, 96, 6, 256, 3)};
  nn::CausalLM student{threaded_config(nn::AttentionKind::affine, 64, 4, 192, 2)};
  Generator gen;
  nn::Params teacher_params, start_params;
  nn::State teacher_state, start_state;
  explicit ThreadedPair(uint64_t seed) : gen(seed) {
    std::tie(teacher_params, teacher_state) = teacher.init(gen);
    std::tie(start_params, start_state) = student.init(gen);
  }
  Teacher view() const { return {&teacher, &teacher_params, &teacher_state}; }
};

}  // namespace

TEST_CASE("the same seed gives identical metrics; 20 + 20 resumed steps equal 40 steps, also from mid-run") {
  Pair pair;
  nn::CausalLM student(micro(nn::AttentionKind::affine));
  TokenData data = corpus();
  auto run = [&](const TrainConfig& c, bool resume) {
    Generator gen(5);
    auto [ps, st] = student.init(gen);
    return fit(student, ps, st, pair.view(), data, c, resume);
  };
  TrainConfig full = config("cotan_train_full", 40);
  TrainResult a = run(full, false);
  TrainConfig again = config("cotan_train_again", 40);
  TrainResult b = run(again, false);
  CHECK(deterministic_metrics(full.run_dir) == deterministic_metrics(again.run_dir));
  REQUIRE(a.steps.size() == 40);

  TrainConfig first = config("cotan_train_resume", 40);
  first.stop_after = 20;
  run(first, false);
  TrainConfig second = config("cotan_train_resume", 40, true);
  TrainResult resumed = run(second, true);
  REQUIRE(resumed.steps.size() == 20);
  for (size_t i = 0; i < 20; ++i) {
    CHECK(resumed.steps[i].loss == a.steps[20 + i].loss);
    CHECK(resumed.steps[i].grad_norm == a.steps[20 + i].grad_norm);
  }
  CHECK(a.steps.back().loss < a.steps.front().loss);
  for (const auto& [name, t] : a.params)
    CHECK(t.to_vector<float>() == resumed.params.at(name).to_vector<float>());
  CHECK(deterministic_metrics(full.run_dir) == deterministic_metrics(second.run_dir));

  // On two threads each step draws the next micro-batch ahead (train_step's lookahead), so a
  // checkpoint written mid-run, after step 3 of 6, has the first batch of step 4 waiting: it must
  // hold the loader's position before that batch.
  if (tbb::this_task_arena::max_concurrency() >= 2) CHECK(runs_side_by_side(Device::cpu()));
  TrainConfig c = config("cotan_train_waiting", 6);
  c.checkpoint_every = 3;
  c.keep_checkpoints = 2;
  const TrainResult six = run(c, false);
  const std::string metrics = deterministic_metrics(c.run_dir);
  fs::remove_all(fs::path(c.run_dir) / "checkpoint");  // the step-6 one: resume from checkpoint-3
  const TrainResult resumed_at_3 = run(config("cotan_train_waiting", 6, true), true);
  REQUIRE(resumed_at_3.start_step == 3);
  REQUIRE(resumed_at_3.steps.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(resumed_at_3.steps[i].loss == six.steps[3 + i].loss);
  for (const auto& [name, t] : six.params)
    CHECK(t.to_vector<float>() == resumed_at_3.params.at(name).to_vector<float>());
  CHECK(deterministic_metrics(c.run_dir) == metrics);
}

TEST_CASE("resuming under another config is refused") {
  Pair pair;
  TokenData data = corpus();
  nn::CausalLM student(micro(nn::AttentionKind::softmax)), other(micro(nn::AttentionKind::sink));
  Generator gen(5);
  auto [ps, st] = student.init(gen);
  TrainConfig c = config("cotan_train_other", 3);
  fit(student, ps, st, pair.view(), data, c, false);
  auto [ps2, st2] = other.init(gen);
  CHECK_THROWS_WITH_AS(fit(other, ps2, st2, pair.view(), data, c, true),
                       doctest::Contains("the checkpoint was written for another model config"), Error);
}

TEST_CASE("a diverging run stops at the step with a NaN or Inf loss and keeps the last good checkpoint") {
  Pair pair;
  TokenData data = corpus();
  nn::CausalLM student(micro(nn::AttentionKind::softmax));
  Generator gen(5);
  auto [ps, st] = student.init(gen);
  TrainConfig c = config("cotan_train_nan", 30);
  c.checkpoint_every = 2;
  c.clip = 0;
  c.schedule.lr = 1e30;
  c.schedule.warmup_steps = 0;
  std::string message;
  try {
    fit(student, ps, st, pair.view(), data, c, false);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.starts_with("[train] step "));
  CHECK(message.find("last good checkpoint") != std::string::npos);
}

TEST_CASE("bad input: unwritable run directory, teacher vocabulary, seq_len longer than the data") {
  Pair pair;
  TokenData data = corpus();
  nn::CausalLM student(micro(nn::AttentionKind::softmax));
  Generator gen(5);
  auto [ps, st] = student.init(gen);
  TrainConfig c = config("cotan_train_bad", 2);
  c.run_dir = "/proc/cotan-run";
  CHECK_THROWS_WITH_AS(fit(student, ps, st, pair.view(), data, c, false),
                       doctest::Contains("cannot create run directory /proc/cotan-run"), Error);
  nn::CausalLM wide(micro(nn::AttentionKind::softmax, 300));
  auto [wps, wst] = wide.init(gen);
  Teacher t{&wide, &wps, &wst};
  CHECK_THROWS_WITH_AS(fit(student, ps, st, t, data, config("cotan_train_vocab", 2), false),
                       "[distill] teacher vocabulary 300 differs from the student's 257 (pass --slice-teacher-vocab to "
                       "drop the teacher's extra rows)",
                       Error);
  TrainConfig longer = config("cotan_train_long", 2);
  longer.seq_len = 100000;
  CHECK_THROWS_WITH_AS(fit(student, ps, st, pair.view(), data, longer, false),
                       "[train] seq_len 100000 is above the student's max_position_embeddings 2048 (pass "
                       "--allow-longer-context to train on longer sequences anyway)",
                       Error);
  longer.allow_longer_context = true;
  CHECK_THROWS_WITH_AS(fit(student, ps, st, pair.view(), data, longer, false),
                       doctest::Contains("seq_len 100000 needs at least 100001 tokens"), Error);
  CHECK_FALSE(fs::exists(longer.run_dir));
  // A vocabulary smaller than the data's ids, found before the first step.
  nn::CausalLM narrow(micro(nn::AttentionKind::softmax, 100));
  auto [nps, nst] = narrow.init(gen);
  TrainConfig small = config("cotan_train_narrow", 2);
  CHECK_THROWS_WITH_AS(fit(narrow, nps, nst, Teacher{}, data, small, false),
                       "[train] the training data holds token id 256, outside the model's vocabulary of 100 (vocab_size)",
                       Error);
  CHECK_FALSE(fs::exists(small.run_dir));
}

TEST_CASE("the model's logits are donated to the loss: the gradient is written over them, same parameter gradients") {
  for (bool tied : {false, true})
    for (nn::AttentionKind kind : {nn::AttentionKind::softmax, nn::AttentionKind::affine}) {
      CAPTURE(tied);
      nn::ModelConfig mc = micro(kind);
      mc.tie_word_embeddings = tied;
      nn::CausalLM model(mc);
      Generator gen(11);
      auto [ps, st] = model.init(gen);
      const Tensor ids = randint({2, 9}, 0, kByteVocab, gen), targets = randint({2, 9}, 0, kByteVocab, gen);
      const Tensor teacher = randn({2, 9, kByteVocab}, gen);
      auto step = [&](bool donate) {
        bool in_place = false;
        auto [value, grads] = nn::value_and_grad(
            [&](const nn::Params& p) {
              Tensor logits = model.apply(ids, p, st).first;
              LossParts parts = donate ? distill_loss(std::move(logits), teacher, targets)
                                       : distill_loss(logits, teacher, targets);
              in_place = parts.gradient_in_logits;
              return parts.total;
            },
            ps);
        return std::tuple{value.item<double>(), grads, in_place};
      };
      const auto [kept_value, kept_grads, kept_in_place] = step(false);
      const auto [value, grads, in_place] = step(true);
      CHECK_FALSE(kept_in_place);
      CHECK(in_place);
      CHECK(value == kept_value);
      for (const auto& [name, g] : kept_grads) {
        CAPTURE(name);
        CHECK(max(abs(grads.at(name) - g)).item<double>() == 0);
      }
    }
}

TEST_CASE("the objective: one function for the training step and evaluation") {
  Pair pair;
  nn::CausalLM student(micro(nn::AttentionKind::affine));
  Generator gen(7);
  auto [ps, st] = student.init(gen);
  const Tensor ids = randint({2, 9}, 0, kByteVocab, gen), targets = randint({2, 9}, 0, kByteVocab, gen);
  const Batch batch{ids, targets, {}};
  const std::string alpha = "model.layers.0.self_attn.alpha_ma";
  const std::vector<double> alpha_before = st.buffers.at(alpha).to_vector<double>();

  // Pretraining: the cross-entropy of the student's logits; training mode moves alpha_ma.
  st.training = true;
  auto [ce_parts, trained] = objective(student, Teacher{}, ps, st, batch, LossConfig{});
  const Tensor logits = student.apply(ids, ps, st).first;
  CHECK(ce_parts.total.item<double>() == cross_entropy(logits, targets).item<double>());
  CHECK(ce_parts.ce.item<double>() == ce_parts.total.item<double>());
  CHECK_FALSE(ce_parts.kd.defined());
  CHECK(trained.buffers.at(alpha).to_vector<double>() != alpha_before);
  CHECK(st.buffers.at(alpha).to_vector<double>() == alpha_before);  // the argument is not changed

  // Distillation in evaluation mode: the KD loss against the teacher's logits, State unchanged.
  st.training = false;
  LossConfig mix;
  mix.kd_ratio = 0.25;
  auto [kd_parts, same] = objective(student, pair.view(), ps, st, batch, mix);
  const Tensor teacher_logits = pair.teacher.apply(ids, pair.teacher_params, pair.teacher_state).first;
  const LossParts expected = distill_loss(student.apply(ids, ps, st).first, teacher_logits, targets, mix);
  CHECK(kd_parts.total.item<double>() == expected.total.item<double>());
  CHECK(kd_parts.kd.item<double>() == expected.kd.item<double>());
  CHECK(kd_parts.ce.item<double>() == expected.ce.item<double>());
  CHECK(same.buffers.at(alpha).to_vector<double>() == alpha_before);

  // kd_ratio 0 with a teacher: the cross-entropy alone, with the heads fused into the loss or
  // not (the teacher's pass is skipped: teacher_output has nothing for it).
  LossConfig ce_only;
  ce_only.kd_ratio = 0;
  CHECK_FALSE(teacher_output(pair.view(), batch, ce_only, true).defined());
  CHECK_FALSE(teacher_output(pair.view(), batch, ce_only, false).defined());
  const double ce = cross_entropy(student.apply(ids, ps, st).first, targets).item<double>();
  for (const bool fused_head : {true, false}) {
    INFO("fused head: ", fused_head);
    const LossParts parts = objective(student, pair.view(), ps, st, batch, ce_only, fused_head).first;
    CHECK(parts.total.item<double>() == doctest::Approx(ce).epsilon(1e-6));
    if (!fused_head) CHECK(parts.total.item<double>() == ce);  // the same kernel on the same logits
    CHECK(parts.ce.item<double>() == parts.total.item<double>());
  }

  // evaluate() reports both parts whatever kd_ratio the training uses.
  LossConfig pure_kd;
  pure_kd.kd_ratio = 1.0;
  const EvalRecord e = evaluate(student, ps, st, pair.view(), {batch}, pure_kd);
  CHECK(e.kd == expected.kd.item<double>());
  CHECK(e.ce == cross_entropy(student.apply(ids, ps, st).first, targets).item<double>());
  CHECK(e.ppl == doctest::Approx(std::exp(e.ce)));
}

TEST_CASE("a distillation step: the teacher's pass beside the student's gives the bits of 1 thread") {
  INFO("cores available: ", tbb::this_task_arena::max_concurrency());
  ThreadedPair pair(21);
  const nn::CausalLM& student = pair.student;
  const Batch batch{randint({4, 64}, 0, kByteVocab, pair.gen), randint({4, 64}, 0, kByteVocab, pair.gen), {}};
  for (const bool fused_head : {true, false}) {
    INFO("fused head: ", fused_head);
    auto run = [&](int threads) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
      TrainConfig c;
      c.fused_head = fused_head;
      c.loss.kd_ratio = 0.5;
      nn::Params ps = pair.start_params;
      nn::State st = pair.start_state;
      st.training = true;
      AdamW opt(c.adamw, student.param_specs());
      std::vector<double> losses;
      for (int step = 0; step < 2; ++step)
        losses.push_back(train_step(student, ps, st, opt, pair.view(), [&] { return batch; }, c, 1e-3).loss);
      return std::pair{losses, ps};
    };
    const auto [one_losses, one_params] = run(1);
    const auto [two_losses, two_params] = run(2);
    CHECK(one_losses == two_losses);
    CHECK(std::isfinite(one_losses[1]));
    CHECK(one_losses[1] != one_losses[0]);  // the step trained the student
    for (const auto& [name, value] : one_params) {
      INFO(name);
      CHECK(value.to_vector<double>() == two_params.at(name).to_vector<double>());
    }
  }
}

TEST_CASE("the next micro-batch's teacher pass beside this one's: same batches, same bits, one batch waiting") {
  INFO("cores available: ", tbb::this_task_arena::max_concurrency());
  ThreadedPair pair(23);
  const nn::CausalLM& student = pair.student;
  const nn::Params& start_params = pair.start_params;
  const nn::State& start_state = pair.start_state;
  const Teacher view = pair.view();
  std::vector<Batch> batches;  // a different batch each draw
  for (int i = 0; i < 7; ++i)
    batches.push_back({randint({2, 48}, 0, kByteVocab, pair.gen), randint({2, 48}, 0, kByteVocab, pair.gen), {}});
  constexpr int kSteps = 3;
  for (const bool fused_head : {true, false}) {
    INFO("fused head: ", fused_head);
    TrainConfig c;
    c.fused_head = fused_head;
    c.grad_accum = 2;
    c.loss.kd_ratio = 0.5;
    struct Run {
      std::vector<double> losses;
      nn::Params params;
      size_t drawn = 0;
      bool waiting_after_step = true;  // a batch waited in `ahead` after each step but the last
    };
    auto run = [&](int threads, bool look_ahead) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
      Run r;
      r.params = start_params;
      nn::State st = start_state;
      st.training = true;
      AdamW opt(c.adamw, student.param_specs());
      Lookahead ahead;
      for (int step = 0; step < kSteps; ++step) {
        const bool more = step + 1 < kSteps;
        r.losses.push_back(train_step(student, r.params, st, opt, view, [&] { return batches.at(r.drawn++); }, c,
                                      1e-3, look_ahead ? &ahead : nullptr, more)
                               .loss);
        if (ahead.batch.has_value() != more) r.waiting_after_step = false;
        if (!ahead.batch) continue;
        // The batch waiting is the next one, with the teacher's output on it.
        CHECK(ahead.batch->inputs.same_storage(batches.at(r.drawn - 1).inputs));
        const Tensor direct = teacher_output(view, *ahead.batch, c.loss, fused_head);
        CHECK(ahead.teacher_out.to_vector<float>() == direct.to_vector<float>());
      }
      return r;
    };
    const Run plain = run(1, false), one = run(1, true), two = run(2, true);
    {
      // A waiting batch's teacher output is the one its loss reads: planted with the teacher's
      // output on another batch, the step's loss is the objective's with that output.
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
      TrainConfig single = c;
      single.grad_accum = 1;
      nn::Params ps = start_params;
      nn::State st = start_state;
      st.training = true;
      const Tensor other = teacher_output(view, batches[1], c.loss, fused_head);
      const double expected = objective(student, view, ps, st, batches[0], c.loss, fused_head, other)
                                  .first.total.item<double>();
      CHECK(expected != objective(student, view, ps, st, batches[0], c.loss, fused_head).first.total.item<double>());
      Lookahead planted{batches[0], other, fused_head};
      AdamW opt(c.adamw, student.param_specs());
      const double loss = train_step(student, ps, st, opt, view, [&]() -> Batch { throw std::runtime_error("drew"); },
                                     single, 1e-3, &planted, false)
                              .loss;
      CHECK(loss == expected);
      CHECK(!planted.batch);
      // Planted as the other kind of output (hidden states for logits or back): dropped, and the
      // step's loss is the objective's own on the batch.
      ps = start_params;
      st = start_state;
      st.training = true;
      AdamW fresh(c.adamw, student.param_specs());
      Lookahead other_kind{batches[0], teacher_output(view, batches[0], c.loss, !fused_head), !fused_head};
      const double own = objective(student, view, ps, st, batches[0], c.loss, fused_head).first.total.item<double>();
      CHECK(train_step(student, ps, st, fresh, view, [&]() -> Batch { throw std::runtime_error("drew"); }, single, 1e-3,
                       &other_kind, false)
                .loss == own);
    }
    CHECK(plain.drawn == size_t(kSteps * c.grad_accum));
    CHECK(one.drawn == plain.drawn);  // one thread: nothing drawn ahead
    CHECK(two.drawn == plain.drawn);  // the last step drew nothing for a step that does not come
    CHECK(one.losses == plain.losses);
    CHECK(two.losses == plain.losses);
    CHECK(plain.losses[2] != plain.losses[1]);
    if (tbb::this_task_arena::max_concurrency() >= 2) CHECK(two.waiting_after_step);
    for (const auto& [name, value] : plain.params) {
      INFO(name);
      CHECK(value.to_vector<double>() == one.params.at(name).to_vector<double>());
      CHECK(value.to_vector<double>() == two.params.at(name).to_vector<double>());
    }
  }
}

TEST_CASE("metrics records: one JSON object per line, read back exactly") {
  MetricsRecord r;
  r.step = {12, 3e-3, 2.5, 2.25, 0.1 + 0.2, 1.0 / 3.0, 0.75, 1234.5, 98.25};
  r.alpha = {{"model.layers.0.self_attn.alpha_ma", 0.125, 1e-3}, {"model.layers.1.self_attn.alpha_ma", 0.5, 0}};
  r.eval = EvalRecord{12, 2.0, 3.0, std::exp(3.0)};
  const std::string line = r.to_json().dump();
  CHECK(line.starts_with(R"({"step":12,"lr":0.003,"loss":2.5,"kd":2.25,"ce":0.30000000000000004,)"));
  CHECK(line.ends_with(R"(,"tokens_per_s":1234.5,"elapsed_s":98.25})"));
  const MetricsRecord back = MetricsRecord::from_json(parse_json(line), "m.jsonl line 1");
  CHECK(back.step.step == 12);
  CHECK(back.step.ce == 0.1 + 0.2);
  CHECK(back.step.teacher_entropy == 1.0 / 3.0);
  CHECK(back.step.tokens_per_s == 1234.5);
  CHECK(back.step.elapsed_s == 98.25);
  REQUIRE(back.alpha.size() == 2);
  CHECK(back.alpha[1].name == "model.layers.1.self_attn.alpha_ma");
  CHECK(back.alpha[0].std == 1e-3);
  REQUIRE(back.eval);
  CHECK(back.eval->step == 12);
  CHECK(back.eval->ppl == std::exp(3.0));
  CHECK(back.to_json().dump() == line);

  // No eval on other steps; a non-finite number goes out as null and comes back as NaN.
  MetricsRecord plain;
  plain.step.grad_norm = std::numeric_limits<double>::infinity();
  const std::string plain_line = plain.to_json().dump();
  CHECK(plain_line.find("\"eval\"") == std::string::npos);
  CHECK(plain_line.find("\"grad_norm\":null") != std::string::npos);
  const MetricsRecord plain_back = MetricsRecord::from_json(parse_json(plain_line), "m.jsonl line 2");
  CHECK_FALSE(plain_back.eval);
  CHECK(std::isnan(plain_back.step.grad_norm));

  // A loss part that was not computed is left out and reads back empty, not as 0.
  MetricsRecord pretraining;
  pretraining.step.ce = 2.0;
  pretraining.eval = EvalRecord{0, std::nullopt, 2.0, std::exp(2.0)};
  const std::string ce_line = pretraining.to_json().dump();
  for (const char* key : {"\"kd\"", "\"teacher_entropy\""}) CHECK(ce_line.find(key) == std::string::npos);
  CHECK(ce_line.find(R"("eval":{"ce":2.0,"ppl":)") != std::string::npos);
  const MetricsRecord ce_back = MetricsRecord::from_json(parse_json(ce_line), "m.jsonl line 3");
  CHECK_FALSE(ce_back.step.kd);
  CHECK_FALSE(ce_back.step.teacher_entropy);
  CHECK(ce_back.step.ce == 2.0);
  REQUIRE(ce_back.eval);
  CHECK_FALSE(ce_back.eval->kd);
  CHECK(ce_back.to_json().dump() == ce_line);

  Json missing = r.to_json();
  missing.erase("loss");
  CHECK_THROWS_WITH_AS(MetricsRecord::from_json(missing, "run/metrics.jsonl line 3"),
                       "[train] run/metrics.jsonl line 3: missing field 'loss'", Error);
  Json bad = r.to_json();
  bad["alpha"][1]["mean"] = "high";
  CHECK_THROWS_WITH_AS(MetricsRecord::from_json(bad, "run/metrics.jsonl line 3"),
                       "[train] run/metrics.jsonl line 3: field 'alpha[1].mean' must be a number, got a string", Error);
}

TEST_CASE("metrics.jsonl holds only the loss parts a step computed") {
  // The keys of every row of a run's metrics.jsonl, and of its "eval" objects.
  auto keys_of = [](const std::string& dir) {
    std::set<std::string> row_keys, eval_keys;
    std::ifstream in(fs::path(dir) / "metrics.jsonl");
    int64_t expected_step = 0;
    for (std::string line; std::getline(in, line);) {
      const Json row = parse_json(line);
      CHECK(row.at("step").get<int64_t>() == expected_step++);  // 0-based, one row per step
      for (const auto& item : row.items()) row_keys.insert(item.key());
      if (row.contains("eval"))
        for (const auto& item : row.at("eval").items()) eval_keys.insert(item.key());
    }
    return std::pair{row_keys, eval_keys};
  };
  Pair pair;
  nn::CausalLM model(micro(nn::AttentionKind::softmax));
  const TokenData data = corpus();
  auto train = [&](TrainConfig c, const Teacher& teacher) {
    c.eval_every = 1;
    Generator gen(5);
    auto [ps, st] = model.init(gen);
    fit(model, ps, st, teacher, data, c, false);
    return c.run_dir;
  };
  using Keys = std::set<std::string>;
  const Keys common{"step", "lr", "loss", "grad_norm", "alpha", "eval", "tokens_per_s", "elapsed_s"};
  auto with = [&](std::initializer_list<const char*> extra) {
    Keys k = common;
    for (const char* e : extra) k.insert(e);
    return k;
  };
  {
    INFO("pretraining: no teacher, so no kd or teacher_entropy");
    const auto [rows, evals] = keys_of(train(config("cotan_train_keys_pretrain", 3), Teacher{}));
    CHECK(rows == with({"ce"}));
    CHECK(evals == Keys{"ce", "ppl"});
  }
  {
    INFO("pure KD (kd_ratio 1): no ce in the training rows; evaluation computes both");
    TrainConfig c = config("cotan_train_keys_kd", 3);
    c.loss.kd_ratio = 1.0;
    const auto [rows, evals] = keys_of(train(c, pair.view()));
    CHECK(rows == with({"kd", "teacher_entropy"}));
    CHECK(evals == Keys{"kd", "ce", "ppl"});
  }
  {
    INFO("a mix computes every part");
    TrainConfig c = config("cotan_train_keys_mix", 3);
    c.loss.kd_ratio = 0.5;
    const auto [rows, evals] = keys_of(train(c, pair.view()));
    CHECK(rows == with({"kd", "ce", "teacher_entropy"}));
    CHECK(evals == Keys{"kd", "ce", "ppl"});
  }
  {
    INFO("kd_ratio 0 with a teacher: the cross-entropy only");
    TrainConfig c = config("cotan_train_keys_ce", 3);
    c.loss.kd_ratio = 0.0;
    const auto [rows, evals] = keys_of(train(c, pair.view()));
    CHECK(rows == with({"ce"}));
  }
}

TEST_CASE("a corrupt metrics.jsonl names the file and the line") {
  const fs::path dir = fs::temp_directory_path() / "cotan_train_bad_metrics";
  fs::create_directories(dir);
  MetricsRecord r;
  std::ofstream(dir / "metrics.jsonl") << r.to_json().dump() << "\n{\"step\": 1,\n";
  CHECK_THROWS_WITH_AS(read_metrics(dir.string()),
                       ("[train] " + (dir / "metrics.jsonl").string() +
                        " line 2: column 12: syntax error while parsing object key - unexpected end of input; "
                        "expected string literal")
                           .c_str(),
                       Error);
  fs::remove_all(dir);
}

namespace {

// Every file under dir (but the lock) with its bytes: what must not change.
std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == ".lock") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    out[fs::relative(e.path(), dir).string()] = bytes.str();
  }
  return out;
}

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a run directory holds one run: a second one fails at once, a new one over an old one too") {
  SmallRun r;
  TrainConfig c = config("cotan_train_guard", 4);
  r.run(c, false);
  const auto before = files_of(c.run_dir);
  // A new run over the finished one: refused, nothing changed.
  CHECK(error_text([&] { r.run(c, false); }) ==
        "[train] " + c.run_dir + " already holds a run (checkpoint/, metrics.jsonl): continue it with --resume " +
            c.run_dir + ", or pass --overwrite to move it aside");
  CHECK(files_of(c.run_dir) == before);
  // While another holder has the lock, neither a new run nor a resume starts.
  {
    RunDirLock other(c.run_dir, "train");
    const std::string pid = std::to_string(::getpid());
    CHECK_THROWS_WITH_AS(r.run(c, true), doctest::Contains((c.run_dir + " is in use by process " + pid).c_str()), Error);
    TrainConfig fresh = c;
    fresh.existing = ExistingRun::move_aside;
    CHECK_THROWS_WITH_AS(r.run(fresh, false), doctest::Contains(("is in use by process " + pid).c_str()), Error);
    CHECK(files_of(c.run_dir) == before);
  }
  // --overwrite moves the old run aside, whole, and starts anew.
  TrainConfig over = c;
  over.existing = ExistingRun::move_aside;
  fs::remove_all(c.run_dir + ".old-1");
  r.run(over, false);
  CHECK(files_of(c.run_dir + ".old-1") == before);
  CHECK(deterministic_metrics(c.run_dir) == deterministic_metrics(c.run_dir + ".old-1"));  // the same seed, the same run
  fs::remove_all(c.run_dir + ".old-1");
}

TEST_CASE("resume survives a torn metrics line and leftovers of a crash; the last K checkpoints are kept") {
  SmallRun r;
  TrainConfig full = config("cotan_train_torn_full", 8);
  r.run(full, false);
  TrainConfig c = config("cotan_train_torn", 8);
  c.stop_after = 4;
  c.checkpoint_every = 1;
  c.keep_checkpoints = 3;
  r.run(c, false);
  // checkpoint/ (step 4) and the two before it.
  CHECK(fs::is_directory(fs::path(c.run_dir) / "checkpoint-3"));
  CHECK(fs::is_directory(fs::path(c.run_dir) / "checkpoint-2"));
  CHECK_FALSE(fs::exists(fs::path(c.run_dir) / "checkpoint-1"));
  // A crash while appending the next step's line, and one inside a checkpoint write.
  std::ofstream(fs::path(c.run_dir) / "metrics.jsonl", std::ios::app) << "{\"step\": 4, \"lr\": 0.0";
  fs::create_directories(fs::path(c.run_dir) / "checkpoint.tmp");
  std::ofstream(fs::path(c.run_dir) / "checkpoint.tmp" / "model.safetensors") << "partial";
  fs::create_directories(fs::path(c.run_dir) / "checkpoint.old");  // the name earlier versions left behind
  TrainConfig rest = config("cotan_train_torn", 8, true);
  rest.checkpoint_every = 1;
  rest.keep_checkpoints = 3;
  r.run(rest, true);
  CHECK(deterministic_metrics(rest.run_dir) == deterministic_metrics(full.run_dir));
  // elapsed_s runs on across the resume: positive and never decreasing.
  const TrainResult history = read_metrics(rest.run_dir);
  REQUIRE(history.steps.size() == 8);
  CHECK(history.steps.front().elapsed_s > 0);
  for (size_t i = 1; i < history.steps.size(); ++i) CHECK(history.steps[i].elapsed_s >= history.steps[i - 1].elapsed_s);
  CHECK_FALSE(fs::exists(fs::path(c.run_dir) / "checkpoint.tmp"));
  CHECK_FALSE(fs::exists(fs::path(c.run_dir) / "checkpoint.old"));
  // A torn line that is not the last one is an error naming the file and the line.
  std::string lines = files_of(c.run_dir).at("metrics.jsonl");
  lines.insert(lines.find('\n') + 1, "{\"step\": 1,\n");
  std::ofstream(fs::path(c.run_dir) / "metrics.jsonl", std::ios::trunc) << lines;
  CHECK_THROWS_WITH_AS(r.run(rest, true), doctest::Contains((c.run_dir + "/metrics.jsonl line 2: column").c_str()), Error);
}

TEST_CASE("a failed metrics append (a full disk) stops the run with the file named, whole lines left") {
  SmallRun r;
  TrainConfig c = config("cotan_train_full_disk", 40);
  std::string message;
  {
    const FileSizeLimit limit(1500);  // a few metrics lines; the checkpoint comes only at the end
    message = error_text([&] { r.run(c, false); });
  }
  const std::string path = c.run_dir + "/metrics.jsonl";
  CHECK(message.starts_with("[train] step "));
  CHECK(message.find(": " + path + ": cannot append: File too large (last good checkpoint: none written yet in " +
                     c.run_dir + ")") != std::string::npos);
  const std::string lines = files_of(c.run_dir).at("metrics.jsonl");
  CHECK(!lines.empty());
  CHECK(lines.back() == '\n');
  CHECK(read_metrics(c.run_dir).steps.size() == size_t(std::count(lines.begin(), lines.end(), '\n')));
}

TEST_CASE("a damaged trainer.json is an error naming the file and the field") {
  SmallRun r;
  TrainConfig c = config("cotan_train_bad_meta", 4);
  c.stop_after = 2;
  r.run(c, false);
  const fs::path meta = fs::path(c.run_dir) / "checkpoint" / "trainer.json";
  Json j = read_json_file(meta.string());
  j["train"] = 3;
  std::ofstream(meta, std::ios::trunc) << j.dump();
  TrainConfig again = config("cotan_train_bad_meta", 4, true);
  CHECK(error_text([&] { r.run(again, true); }) ==
        "[resume] " + meta.string() + ": field 'train' must be an object, got an integer");
}

TEST_CASE("a flipped bit in a checkpoint is an error naming the file; an older checkpoint still resumes") {
  SmallRun r;
  TrainConfig c = config("cotan_train_bitflip", 6);
  c.stop_after = 3;
  c.checkpoint_every = 1;
  r.run(c, false);
  const fs::path weights = fs::path(c.run_dir) / "checkpoint" / "model.safetensors";
  std::string bytes = files_of(c.run_dir).at("checkpoint/model.safetensors");
  bytes[bytes.size() - 3] = char(bytes[bytes.size() - 3] ^ 0x40);  // an exponent bit of the last float
  std::ofstream(weights, std::ios::binary | std::ios::trunc) << bytes;
  const auto before = files_of(c.run_dir);
  TrainConfig again = config("cotan_train_bitflip", 6, true);
  const std::string message = error_text([&] { r.run(again, true); });
  CHECK(message.starts_with("[resume] " + weights.string() + ": checksum mismatch (XXH3-64 is "));
  CHECK(message.ends_with("): the file is corrupted"));
  CHECK(files_of(c.run_dir) == before);
  // The previous checkpoint is intact: moved into place, it resumes.
  fs::remove_all(fs::path(c.run_dir) / "checkpoint");
  CHECK(r.run(again, true).start_step == 2);
}
