// Knowledge distillation in a few library calls: a teacher, a student with affine-scaled
// attention, the forward-KL loss, AdamW.
#include <iostream>

#include "nn/model.hpp"
#include "train/data.hpp"
#include "train/losses.hpp"
#include "train/optim.hpp"
#include "autograd/autograd.hpp"

using namespace cotan;

int main() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a stitch in time saves nine; look before you leap. ";
  train::WindowLoader loader(train::TokenSequence(text::encode_bytes(text)), 32, 4, 0);

  nn::ModelConfig teacher_config = nn::preset("tiny-student");  // any trained model would do
  nn::CausalLM teacher(teacher_config);
  Generator gen(1);
  auto [teacher_params, teacher_state] = teacher.init(gen);

  nn::ModelConfig student_config = nn::preset("tiny-student");
  student_config.hidden_size = 64;
  student_config.num_layers = 1;
  student_config.attention.kind = nn::AttentionKind::affine;
  nn::CausalLM student(student_config);
  auto [ps, st] = student.init(gen);
  st.training = true;
  train::AdamW opt({}, student.param_specs());

  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    train::Batch batch = loader.next();
    Tensor teacher_logits;
    {
      NoGrad frozen;
      teacher_logits = teacher.apply(batch.inputs, teacher_params, teacher_state).first;
    }
    nn::State next;
    auto [loss, grads] = nn::value_and_grad([&](const nn::Params& p) {
      auto [logits, s] = student.apply(batch.inputs, p, st);
      next = s;
      return train::distill_loss(std::move(logits), teacher_logits, batch.targets).total;  // gradient over the logits
    }, ps);
    st = next;
    train::clip_grad_norm(grads, 1.0);
    opt.step(ps, grads, 3e-3);
    (step == 0 ? first : last) = loss.item<double>();
  }
  std::cout << "KD loss " << first << " -> " << last << "\n";
  return last < first ? 0 : 1;
}
