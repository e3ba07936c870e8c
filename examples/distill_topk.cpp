// Knowledge distillation on offline teacher targets: the teacher runs once, ahead of training,
// and keeps only its top-k log-probabilities and the tail mass per token (what `cotan
// teacher-logits` writes to files); the student then trains on the sparse KL against them, with
// no teacher in memory. The same student trained on the dense KL of the full teacher is the
// reference: with k = 16 of 257 ids, from a teacher that has learned its text, the student ends
// within 5% of the reference's distance to the teacher (measured as the dense KL).
#include <cmath>
#include <iostream>

#include "autograd/autograd.hpp"
#include "nn/model.hpp"
#include "tensor/ops.hpp"
#include "train/data.hpp"
#include "train/losses.hpp"
#include "train/optim.hpp"
#include "train/teacher_topk.hpp"

using namespace cotan;

int main() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "an apple a day keeps the doctor away; many hands make light work. ";
  constexpr int64_t kTopK = 16, kSteps = 30, kBatches = 6;
  constexpr double kTemperature = 1.0;

  // A teacher that has learned the text (a random one spreads its mass over every id: its top-k
  // would say little).
  nn::CausalLM teacher(nn::preset("tiny-student"));
  Generator gen(4);
  auto [teacher_params, teacher_state] = teacher.init(gen);
  train::WindowLoader loader(train::TokenSequence(text::encode_bytes(text)), 32, 4, 0);
  {
    train::AdamW opt({}, teacher.param_specs());
    for (int step = 0; step < 40; ++step) {
      const train::Batch batch = loader.next();
      auto [ce, grads] = nn::value_and_grad([&](const nn::Params& p) {
        return train::cross_entropy(teacher.apply(batch.inputs, p, teacher_state).first, batch.targets);
      }, teacher_params);
      opt.step(teacher_params, grads, 1e-2, train::clip_scale(train::global_norm(grads), 1.0));
    }
  }

  // Offline: the teacher's top-k targets of every batch the student will see, computed once.
  std::vector<train::Batch> batches;
  std::vector<Tensor> dense;  // the full teacher logits, kept only for the reference run
  for (int64_t b = 0; b < kBatches; ++b) {
    train::Batch batch = loader.next();
    NoGrad frozen;
    Tensor logits = teacher.apply(batch.inputs, teacher_params, teacher_state).first;
    batch.topk = train::teacher_topk(logits, kTopK, kTemperature);
    batches.push_back(batch);
    dense.push_back(logits);
  }

  nn::ModelConfig student_config = nn::preset("tiny-student");
  student_config.hidden_size = 64;
  student_config.num_layers = 1;
  const nn::CausalLM student(student_config);
  train::LossConfig loss;
  loss.temperature = kTemperature;

  // Trains a fresh student on the sparse targets or on the dense teacher logits; returns the
  // dense KL (the measure both runs are judged by) before and after training.
  auto run = [&](bool sparse) {
    Generator init(9);
    auto [ps, st] = student.init(init);
    train::AdamW opt({}, student.param_specs());
    auto dense_kl = [&] {
      NoGrad no_grad;
      double kl = 0;
      for (size_t b = 0; b < batches.size(); ++b)
        kl += train::distill_loss(student.apply(batches[b].inputs, ps, st).first, dense[b], batches[b].targets, loss)
                  .kd.item<double>();
      return kl / double(batches.size());
    };
    const double before = dense_kl();
    for (int64_t step = 0; step < kSteps; ++step) {
      const train::Batch& batch = batches[size_t(step % kBatches)];
      auto [value, grads] = nn::value_and_grad([&](const nn::Params& p) {
        Tensor logits = student.apply(batch.inputs, p, st).first;
        return sparse ? train::sparse_distill_loss(logits, batch.topk, batch.targets, loss).total
                      : train::distill_loss(std::move(logits), dense[size_t(step % kBatches)], batch.targets, loss).total;
      }, ps);
      opt.step(ps, grads, 3e-3, train::clip_scale(train::global_norm(grads), 1.0));
    }
    return std::pair{before, dense_kl()};
  };
  const auto [sparse_before, sparse_after] = run(true);
  const auto [dense_before, dense_after] = run(false);
  std::cout << "dense KL to the teacher: top-" << kTopK << " targets " << sparse_before << " -> " << sparse_after
            << ", full logits " << dense_before << " -> " << dense_after << "\n";
  const bool learned = sparse_after < 0.8 * sparse_before;
  const bool close = std::abs(sparse_after - dense_after) < 0.05 * dense_after;
  return learned && close ? 0 : 1;
}
