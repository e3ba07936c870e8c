// The memory planner (study/plan.hpp) against what the trainer allocates: the CPU allocator's
// peak over a training step (cpu::cpu_memory_stats), within 10%, for the tiny and small recipes'
// shapes and the settings that change the footprint.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>

#include <tbb/global_control.h>

#include "nn/attention_kinds.hpp"
#include "nn/model.hpp"
#include "tensor/cpu/memory_cache.hpp"
#include "tensor/ops.hpp"
#include "train/optim.hpp"
#include "study/plan.hpp"
#include "train/trainer.hpp"

using namespace cotan;
using namespace cotan::study;
using namespace cotan::train;

namespace {

// Bytes the CPU allocator holds at the peak of a training step (the second, when the AdamW
// moments exist), above what was in use before the models were made. On one thread, where the
// teacher's forward pass runs after the student's, on top of all its saved values: the moment the
// plan counts, the worst case of the two passes side by side.
double measured_peak(const PlanInputs& in) {
  tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
  const size_t before = cpu::cpu_memory_stats().in_use;
  const nn::CausalLM student(in.student, in.checkpoint_layers);
  std::optional<nn::CausalLM> teacher_model;
  Generator gen(7);
  auto [ps, st] = student.init(gen);
  nn::Params tps;
  nn::State tst;
  Teacher teacher;
  if (in.teacher) {
    teacher_model.emplace(*in.teacher);
    std::tie(tps, tst) = teacher_model->init(gen);
    if (in.compute != DType::f32) tps = nn::cast(tps, in.compute), tst = nn::cast(tst, in.compute);
    teacher = Teacher{&*teacher_model, &tps, &tst};
  }
  TrainConfig c;
  c.batch_size = in.micro_batch;
  c.seq_len = in.seq_len;
  c.grad_accum = in.grad_accum;
  c.compute_dtype = in.compute;
  c.fused_head = in.fused_head;
  if (!in.teacher) c.loss.kd_ratio = 0;
  AdamW opt(c.adamw, student.param_specs());
  const int64_t vocab = in.student.vocab_size;
  auto next = [&] {
    Batch b;
    b.inputs = randint({in.micro_batch, in.seq_len}, 0, vocab, gen, DType::i32);
    b.targets = randint({in.micro_batch, in.seq_len}, 0, vocab, gen, DType::i64);
    return b;
  };
  train_step(student, ps, st, opt, teacher, next, c, 1e-3);
  cpu::reset_cpu_memory_peak();
  train_step(student, ps, st, opt, teacher, next, c, 1e-3);
  return double(cpu::cpu_memory_stats().peak_in_use - before);
}

PlanInputs tiny(nn::AttentionKind kind = nn::AttentionKind::softmax) {
  PlanInputs in;
  in.student = nn::preset("tiny-student");
  in.student.attention.kind = kind;
  in.teacher = nn::preset("tiny-teacher");
  in.seq_len = 128;
  in.micro_batch = 8;
  return in;
}

void check_plan(const PlanInputs& in) {
  const double measured = measured_peak(in);
  const MemoryPlan plan = plan_memory(in);
  CAPTURE(measured);
  CAPTURE(plan.peak);
  CAPTURE(plan.peak_moment);
  CHECK(std::abs(plan.peak - measured) <= 0.10 * measured);
}

}  // namespace

TEST_CASE("the planned peak is within 10% of the allocator's: the tiny recipe, every attention kind") {
  for (const nn::AttentionKindInfo& k : nn::attention_kinds()) {
    CAPTURE(k.name);
    check_plan(tiny(k.kind));
  }
}

TEST_CASE("the planned peak is within 10% of the allocator's: the small recipe's shapes") {
  PlanInputs in;
  in.student = nn::preset("small-student");
  in.teacher = nn::preset("small-teacher");
  in.seq_len = 256;
  in.micro_batch = 4;
  check_plan(in);
  in.student.attention.kind = nn::AttentionKind::affine;
  check_plan(in);
}

TEST_CASE("the planned peak is within 10% of the allocator's: accumulation, checkpointing, bf16, heads, pretraining") {
  SUBCASE("gradient accumulation") {
    PlanInputs in = tiny();
    in.micro_batch = 4;
    in.grad_accum = 2;
    check_plan(in);
  }
  SUBCASE("activation checkpointing") {
    PlanInputs in = tiny();
    in.checkpoint_layers = true;
    check_plan(in);
  }
  SUBCASE("bf16 compute") {
    PlanInputs in = tiny(nn::AttentionKind::affine);
    in.compute = DType::bf16;
    check_plan(in);
  }
  SUBCASE("a large vocabulary, heads inside the loss and not") {
    PlanInputs in = tiny();
    in.student.vocab_size = in.teacher->vocab_size = 8192;
    check_plan(in);
    in.fused_head = false;
    check_plan(in);
  }
  SUBCASE("pretraining: cross-entropy, no teacher") {
    PlanInputs in = tiny();
    in.student = nn::preset("tiny-teacher");
    in.teacher.reset();
    check_plan(in);
  }
}

TEST_CASE("the plan's parts: ZeRO-1 shards the moments, checkpointing keeps one layer, bf16 halves activations") {
  PlanInputs in;
  in.student = nn::preset("qwen1.5-0.5b");
  in.teacher = nn::preset("qwen1.5-1.8b");
  in.seq_len = 2048;
  in.micro_batch = 4;
  in.compute = DType::bf16;
  in.devices = 8;
  const MemoryPlan full = plan_memory(in);
  in.zero = 1;
  const MemoryPlan sharded = plan_memory(in);
  CHECK(sharded.optimizer == doctest::Approx(full.optimizer / 8));
  CHECK(full.weights == doctest::Approx(4.0 * double(nn::CausalLM(in.student).num_params())));
  CHECK(full.teacher == doctest::Approx(2.0 * double(nn::CausalLM(*in.teacher).num_params())));
  in.checkpoint_layers = true;
  const MemoryPlan ckpt = plan_memory(in);
  CHECK(ckpt.activations < full.activations / 4);
  // Q = 1024, K = 1024, D = 1024, I = 2816, 16 heads: 13,408 + 16 + 2 values per token per layer.
  const double per_layer = 2.0 * 8192 * (4 * 1024 + 3 * 1024 + 2 * 1024 + 3 * 2816 + 16 + 2) + 2.0 * 2 * 2048 * 64;
  const double model = 2.0 * (8192 * (2 * 1024 + 1) + 151936.0 * 1024);
  CHECK(full.activations == doctest::Approx(24 * per_layer + model));
  const StepPlan step = plan_step(in, 1024);
  CHECK(step.tokens == 1024.0 * 2048);
}
