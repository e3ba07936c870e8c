// The gradient checks of the ops above autograd/: the fused layers and the distillation losses,
// appended to the primitive ops' table.
#include "train/gradcheck_cases.hpp"

#include "nn/fused.hpp"
#include "tensor/ops.hpp"
#include "train/losses.hpp"
#include "train/teacher_topk.hpp"

namespace cotan::train {

namespace {

using X = const std::vector<Tensor>&;
using Case = GradcheckCase;
using gradcheck_inputs::normal;
using gradcheck_inputs::positive;

std::vector<OpCheck> build() {
  std::vector<OpCheck> t = primitive_op_checks();
  auto add_case = [&](std::string name, std::function<Case(Generator&)> make) {
    t.push_back(make_op_check(std::move(name), std::move(make)));
  };

  // ---- distillation losses (train/losses.hpp): teacher logits and targets (one ignored) are
  // constants on the student's device; temperature 2, a CE mix ----
  auto kd_case = [&](const char* name, KdLoss kind, bool composed) {
    add_case(name, [kind, composed](Generator& g) -> Case {
      const Tensor teacher = normal({4, 6}, g);
      const Tensor targets = from_vector(std::vector<int64_t>{1, kIgnoreIndex, 5, 0}, {4});
      return {[teacher, targets, kind, composed](X x) {
                LossConfig c;
                c.kind = kind;
                c.temperature = 2;
                c.kd_ratio = 0.7;
                c.jsd_beta = 0.3;
                const Tensor u = to(teacher, x[0].device()), t = to(targets, x[0].device());
                return (composed ? distill_loss_composed(x[0], u, t, c) : distill_loss(x[0], u, t, c)).total;
              },
              {normal({4, 6}, g)}};
    });
  };
  kd_case("distill_loss_fkl", KdLoss::fkl, false);
  kd_case("distill_loss_rkl", KdLoss::rkl, false);
  kd_case("distill_loss_jsd", KdLoss::jsd, false);
  kd_case("distill_loss_composed", KdLoss::jsd, true);
  // The sparse KL on a teacher's top-3 of 6 (train/teacher_topk.hpp), the same mix.
  add_case("sparse_distill_loss", [](Generator& g) -> Case {
    const TopkTargets top = teacher_topk(normal({4, 6}, g), 3, 2.0);
    const Tensor targets = from_vector(std::vector<int64_t>{1, kIgnoreIndex, 5, 0}, {4});
    return {[top, targets](X x) {
              LossConfig c;
              c.temperature = 2;
              c.kd_ratio = 0.7;
              return sparse_distill_loss(x[0], top, to(targets, x[0].device()), c).total;
            },
            {normal({4, 6}, g)}};
  });

  // ---- fused layers (nn/fused.hpp); rope's tables are constants, on x's device ----
  add_case("rms_norm", [](Generator& g) -> Case {
    return {[](X x) { return nn::rms_norm(x[0], x[1], 1e-6); }, {normal({3, 2, 5}, g), positive({5}, g)}};
  });
  add_case("swiglu", [](Generator& g) -> Case {
    return {[](X x) { return nn::swiglu(x[0], x[1]); }, {normal({3, 1, 4}, g), normal({2, 4}, g)}};
  });
  add_case("rope", [](Generator& g) -> Case {
    Tensor cos = normal({4, 6}, g), sin = normal({4, 6}, g);
    return {[cos, sin](X x) { return nn::rope(x[0], to(cos, x[0].device()), to(sin, x[0].device())); },
            {normal({2, 4, 6}, g)}};
  });
  return t;
}

}  // namespace

const std::vector<OpCheck>& op_checks() {
  static const std::vector<OpCheck> table = build();
  return table;
}

}  // namespace cotan::train
