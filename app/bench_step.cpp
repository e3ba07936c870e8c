#include "app/bench_step.hpp"

#include <cmath>
#include <tuple>

#include "tensor/error.hpp"
#include "tensor/ops.hpp"

namespace cotan::app {

BenchStep::BenchStep(const nn::ModelConfig& student_config, int64_t batch_size, int64_t seq_len, Device device,
                     DType compute)
    : teacher(nn::preset(kTeacher)), student(student_config), optimizer(config.adamw, student.param_specs()) {
  Generator teacher_gen(1), student_gen(2), data_gen(3);
  std::tie(teacher_params, teacher_state) = teacher.init(teacher_gen);
  std::tie(params, state) = student.init(student_gen);
  state.training = true;
  const Tensor tokens = randint({batch_size, seq_len + 1}, 0, student_config.vocab_size, data_gen);
  batch = {contiguous(slice(tokens, 1, 0, seq_len)), contiguous(slice(tokens, 1, 1, seq_len + 1)), {}};
  config.batch_size = batch_size;
  config.seq_len = seq_len;
  config.device = device;
  config.compute_dtype = compute;
  // The weights and the batch are made on the CPU (the same bits on any device), then moved.
  teacher_params = nn::adjoin(nn::cast(nn::to(teacher_params, device), compute), teacher.joint_weight_groups());
  teacher_state = nn::cast(nn::to(teacher_state, device), compute);
  params = nn::to(params, device);
  state = nn::to(state, device);
  batch_on_device = train::to(batch, device);
}

train::StepRecord BenchStep::run() {
  const train::Teacher frozen{&teacher, &teacher_params, &teacher_state};
  const train::StepRecord record = train::train_step(student, params, state, optimizer, frozen,
                                                     [&] { return batch_on_device; }, config, kLearningRate, &ahead,
                                                     true);
  check(std::isfinite(record.loss), "bench", "the training step's loss is ", record.loss);
  return record;
}

}  // namespace cotan::app
