// The distillation step `cotan bench train` times and `cotan bench matmul --step` takes its
// products from: `cotan distill`'s step (train::train_step, the body of train::fit's loop) on
// the frozen tiny teacher and a tiny student, with one fixed random batch, the fused KD loss (fkl,
// tau 1, kd_ratio 1), global-norm clipping at 1.0 and AdamW at a constant lr; the teacher's pass
// for the next micro-batch runs beside the student's passes, as in train::fit.
#pragma once

#include <cstdint>

#include "nn/model.hpp"
#include "train/trainer.hpp"

namespace cotan::app {

struct BenchStep {
  static constexpr const char* kTeacher = "tiny-teacher";
  static constexpr const char* kStudent = "tiny-student";
  static constexpr double kLearningRate = 1e-3;  // the recipe's peak lr, held constant
  // `bench train`'s defaults, the step `bench matmul --step` records.
  static constexpr int64_t kBatchSize = 8, kSeqLen = 128;
  static constexpr nn::AttentionKind kAttention = nn::AttentionKind::affine;

  // The teacher is the kTeacher preset, the student `student_config` (kStudent's preset with the
  // attention options of the bench); both made from fixed seeds, so every bench starts from the
  // same bits. `compute` is f32 or bf16 (f32 master weights).
  BenchStep(const nn::ModelConfig& student_config, int64_t batch_size, int64_t seq_len, Device device, DType compute);

  // One step; the loss is checked to be finite.
  train::StepRecord run();

  nn::CausalLM teacher, student;
  // The teacher's weights as `cotan distill` lays them (stacked projections: nn::adjoin), in the
  // compute dtype, on the device; the student's as made (until the first step changes them).
  nn::Params teacher_params, params;
  nn::State teacher_state, state;
  train::Batch batch;  // on the CPU: inputs [batch_size, seq_len] and targets
  train::Batch batch_on_device;
  train::TrainConfig config;
  train::AdamW optimizer;
  train::Lookahead ahead;
};

}  // namespace cotan::app
