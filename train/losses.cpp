// Distillation losses and cross-entropy: argument checks, the autograd node around the backend's
// fused kernel (Backend::kd_loss: tensor/cpu/kd_loss.cpp, cuda/kernels/kd_loss.cu) and the
// composed fallback. The math and the conventions are in train/losses.hpp.
#include "train/losses.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "autograd/autograd.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::train {

namespace {

constexpr const char* kOp = "loss";

// ---- arguments ----

void check_config(const LossConfig& config) {
  const double tau = config.temperature;
  check(std::isfinite(tau) && tau > 0, kOp, "temperature must be positive, got ", tau);
  check(config.kd_ratio >= 0 && config.kd_ratio <= 1, kOp, "kd_ratio must be in [0, 1], got ", config.kd_ratio);
  if (config.kind == KdLoss::jsd)
    check(config.jsd_beta > 0 && config.jsd_beta < 1, kOp, "jsd beta must be in (0, 1), got ", config.jsd_beta);
  check(config.chunk_rows >= 1, kOp, "chunk_rows must be positive, got ", config.chunk_rows);
}

// The checked arguments: student [N, V], teacher [N, Vt] (when KD is computed), target ids.
struct Inputs {
  Tensor student, teacher;            // flattened to [N, V] and [N, Vt]; the teacher detached
  Tensor targets;                     // [N] or undefined
  std::vector<int64_t> target_ids;    // N ids, or empty when there are no targets
  int64_t rows = 0, vocab = 0, teacher_vocab = 0;
  int64_t count = 0;                  // counted (not ignored) tokens
  bool want_kd = false, want_ce = false;
};

Shape leading(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

// A teacher vocabulary the student's can be compared with: as large (or larger, sliced).
void check_teacher_vocab(int64_t teacher_vocab, int64_t vocab, const LossConfig& config) {
  if (teacher_vocab > vocab && !config.slice_teacher_vocab)
    fail(kOp, "teacher vocabulary ", teacher_vocab, " is larger than the student's ", vocab,
         " (pass --slice-teacher-vocab to drop the teacher's extra rows)");
  check(teacher_vocab >= vocab, kOp, "teacher vocabulary ", teacher_vocab, " is smaller than the student's ", vocab);
}

// Checks the targets of `rows` tokens against `student` (named `name`: its leading dims are the
// tokens'), each in [0, vocab) or ignored, and returns the counted tokens (rows without targets,
// which only pure KD allows). `flat` gets the targets as [rows]; `ids`, when given, their values.
int64_t check_targets(const Tensor& targets, const Tensor& student, const char* name, int64_t rows, int64_t vocab,
                      const LossConfig& config, Tensor& flat, std::vector<int64_t>* ids) {
  if (!targets.defined()) {
    check(config.kd_ratio >= 1, kOp, "cross-entropy needs targets (kd_ratio is ", config.kd_ratio, ")");
    return rows;
  }
  check(is_integral(targets.dtype()), kOp, "targets must be i32 or i64, got ", targets.dtype());
  if (targets.shape() != leading(student))
    fail(kOp, "targets ", to_string(targets.shape()), " do not match the ", name, " ", to_string(student.shape()));
  flat = reshape(targets, {rows});
  const std::vector<int64_t> values = flat.to_vector<int64_t>();
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = values[size_t(r)];
    if (t == kIgnoreIndex) continue;
    if (t < 0 || t >= vocab)
      fail(kOp, "target ", t, " at token ", r, " is outside the student's vocabulary of ", vocab,
           " (ignored tokens are ", kIgnoreIndex, ")");
    ++count;
  }
  if (ids) *ids = values;
  return count;
}

Inputs check_inputs(const Tensor& student, const Tensor& teacher, const Tensor& targets, const LossConfig& config) {
  check_config(config);
  Inputs in;
  check(student.defined(), kOp, "student logits are undefined");
  check(is_floating(student.dtype()), kOp, "student logits must be floating, got ", student.dtype());
  check(student.dim() == 2 || student.dim() == 3, kOp, "student logits must be [N, V] or [B, T, V], got ",
        to_string(student.shape()));
  in.vocab = student.size(-1);
  check(in.vocab > 0, kOp, "student logits ", to_string(student.shape()), " have an empty vocabulary");
  in.rows = student.numel() / in.vocab;
  in.student = reshape(student, {in.rows, in.vocab});
  in.want_kd = config.kd_ratio > 0;
  in.want_ce = config.kd_ratio < 1;

  if (in.want_kd) {
    check(teacher.defined(), kOp, "the KD loss needs teacher logits (kd_ratio is ", config.kd_ratio, ")");
    check(is_floating(teacher.dtype()), kOp, "teacher logits must be floating, got ", teacher.dtype());
    check(teacher.device() == student.device(), kOp, "student logits on ", to_string(student.device()),
          " and teacher logits on ", to_string(teacher.device()));
    if (teacher.dim() != student.dim() || leading(teacher) != leading(student))
      fail(kOp, "teacher logits ", to_string(teacher.shape()), " do not match the student logits ",
           to_string(student.shape()));
    in.teacher_vocab = teacher.size(-1);
    check_teacher_vocab(in.teacher_vocab, in.vocab, config);
    in.teacher = reshape(teacher.detach(), {in.rows, in.teacher_vocab});
  }

  in.count = check_targets(targets, student, "student logits", in.rows, in.vocab, config, in.targets, &in.target_ids);
  return in;
}

// f64 for f64 logits, f32 for f32 and bf16.
DType compute_dtype(DType logits) { return logits == DType::f64 ? DType::f64 : DType::f32; }

// g * grad (grad itself when g is 1), in grad's dtype.
Tensor scale_cotangent(const Tensor& grad, const Tensor& g) {
  if (g.item<double>() == 1.0) return grad;
  if (g.dtype() == grad.dtype()) return grad * g;
  return cast(cast(grad, g.dtype()) * g, grad.dtype());
}

LossParts assemble(const KdLossResult& v, const Inputs& in, const LossConfig& config, DType dtype, Device device) {
  double total = 0;
  if (in.want_kd) total += config.kd_ratio * v.kd;
  if (in.want_ce) total += (1 - config.kd_ratio) * v.ce;
  return {scalar(total, dtype, device), scalar(v.kd, dtype, device), scalar(v.ce, dtype, device),
          scalar(v.teacher_entropy, dtype, device), in.count};
}

}  // namespace

// ---- names ----

KdLoss parse_kd_loss(std::string_view name) {
  if (name == "fkl") return KdLoss::fkl;
  if (name == "rkl") return KdLoss::rkl;
  if (name == "jsd") return KdLoss::jsd;
  fail(kOp, "unknown KD loss '", name, "' (known: fkl, rkl, jsd)");
}

void set_kd_loss(LossConfig& config, std::string_view spec) {
  const size_t colon = spec.find(':');
  const KdLoss kind = parse_kd_loss(spec.substr(0, colon));
  if (colon == std::string_view::npos) {
    config.kind = kind;
    return;
  }
  check(kind == KdLoss::jsd, kOp, "only jsd takes a parameter, got '", spec, "'");
  const std::string text(spec.substr(colon + 1));
  double beta = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), beta);
  check(error == std::errc() && end == text.data() + text.size(), kOp, "cannot read the jsd beta in '", spec, "'");
  check(beta > 0 && beta < 1, kOp, "jsd beta must be in (0, 1), got ", beta);
  config.kind = kind;
  config.jsd_beta = beta;
}

std::string_view kd_loss_name(KdLoss kind) {
  switch (kind) {
    case KdLoss::fkl: return "fkl";
    case KdLoss::rkl: return "rkl";
    case KdLoss::jsd: return "jsd";
  }
  return "?";
}

std::string kd_loss_spec(const LossConfig& config) {
  std::string spec(kd_loss_name(config.kind));
  if (config.kind == KdLoss::jsd) spec += cat(":", config.jsd_beta);
  return spec;
}

// ---- fused ----

namespace {

// `donate`: the caller gave up student_logits and nothing else references them; the gradient is
// then written over them.
LossParts fused_loss(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                     const LossConfig& config, bool donate) {
  const Inputs in = check_inputs(student_logits, teacher_logits, targets, config);
  const bool differentiate = grad_enabled() && student_logits.tracked();
  donate = donate && differentiate && student_logits.is_contiguous();
  const Tensor into = donate ? in.student.detach() : Tensor();
  const KdLossResult values = backend(student_logits.device())
                                  .kd_loss(in.student.detach(), in.teacher, in.targets, config, differentiate, into);
  const Tensor grad = differentiate ? reshape(values.grad, student_logits.shape()) : Tensor();

  LossParts parts = assemble(values, in, config, compute_dtype(student_logits.dtype()), student_logits.device());
  parts.gradient_in_logits = donate;
  if (differentiate)
    parts.total = record("distill_loss", parts.total, {student_logits, teacher_logits, targets},
                         [grad](const Tensor& g) { return std::vector{scale_cotangent(grad, g), Tensor(), Tensor()}; });
  return parts;
}

LossConfig cross_entropy_config() {
  LossConfig config;
  config.kd_ratio = 0;
  return config;
}

}  // namespace

LossParts distill_loss(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                       const LossConfig& config) {
  return fused_loss(student_logits, teacher_logits, targets, config, false);
}

LossParts distill_loss(Tensor&& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                       const LossConfig& config) {
  const Tensor logits = std::move(student_logits);
  return fused_loss(logits, teacher_logits, targets, config, logits.sole_owner());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return distill_loss(logits, Tensor(), targets, cross_entropy_config()).total;
}

Tensor cross_entropy(Tensor&& logits, const Tensor& targets) {
  return distill_loss(std::move(logits), Tensor(), targets, cross_entropy_config()).total;
}

// ---- the heads fused into the loss ----

namespace {

// hidden as [N, D], checked: floating, 2-d or 3-d.
Tensor flat_hidden(const Tensor& hidden, const char* name) {
  check(hidden.defined(), kOp, name, " is undefined");
  check(is_floating(hidden.dtype()), kOp, name, " must be floating, got ", hidden.dtype());
  check(hidden.dim() == 2 || hidden.dim() == 3, kOp, name, " must be [N, D] or [B, T, D], got ",
        to_string(hidden.shape()));
  return reshape(hidden, {hidden.numel() / std::max<int64_t>(hidden.size(-1), 1), hidden.size(-1)});
}

void check_head(const Tensor& head, const Tensor& hidden, const char* head_name, const char* hidden_name) {
  check(head.defined(), kOp, head_name, " is undefined");
  if (head.dim() != 2 || head.size(1) != hidden.size(-1))
    fail(kOp, head_name, " must be [V, ", hidden.size(-1), "] for ", hidden_name, " ", to_string(hidden.shape()),
         ", got ", to_string(head.shape()));
  check(head.device() == hidden.device(), kOp, head_name, " is on ", to_string(head.device()), ", ", hidden_name,
        " on ", to_string(hidden.device()));
  check(head.dtype() == hidden.dtype(), kOp, head_name, " is ", head.dtype(), ", ", hidden_name, " is ",
        hidden.dtype());
}

}  // namespace

LossParts head_loss(const Tensor& hidden, const Tensor& head, const Tensor& teacher_hidden, const Tensor& teacher_head,
                    const Tensor& targets, const LossConfig& config, int64_t chunk_rows) {
  check(chunk_rows >= 1, kOp, "head chunk rows must be positive, got ", chunk_rows);
  const Tensor h = flat_hidden(hidden, "student hidden states");
  check_head(head, hidden, "student head", "student hidden states");
  check_config(config);
  const int64_t vocab = head.size(0), rows = h.size(0);
  check(vocab > 0, kOp, "student head ", to_string(head.shape()), " has an empty vocabulary");
  const bool want_kd = config.kd_ratio > 0;
  Tensor th;
  if (want_kd) {
    check(teacher_hidden.defined() && teacher_head.defined(), kOp,
          "the KD loss needs the teacher's hidden states and head (kd_ratio is ", config.kd_ratio, ")");
    th = flat_hidden(teacher_hidden, "teacher hidden states");
    check_head(teacher_head, teacher_hidden, "teacher head", "teacher hidden states");
    check(teacher_hidden.device() == hidden.device(), kOp, "student hidden states on ", to_string(hidden.device()),
          " and teacher hidden states on ", to_string(teacher_hidden.device()));
    if (teacher_hidden.dim() != hidden.dim() || leading(teacher_hidden) != leading(hidden))
      fail(kOp, "teacher hidden states ", to_string(teacher_hidden.shape()), " do not match the student hidden states ",
           to_string(hidden.shape()));
    check_teacher_vocab(teacher_head.size(0), vocab, config);
  }
  Tensor flat_targets;
  const int64_t count =
      check_targets(targets, hidden, "student hidden states", rows, vocab, config, flat_targets, nullptr);
  const bool differentiate = grad_enabled() && (hidden.tracked() || head.tracked());
  HeadLossSpec spec;
  spec.hidden = h.detach();
  spec.head = head.detach();
  spec.teacher_hidden = th.defined() ? th.detach() : th;
  spec.teacher_head = th.defined() ? teacher_head.detach() : Tensor();
  spec.targets = flat_targets;
  spec.count = count;
  spec.chunk_rows = chunk_rows;
  const HeadLossResult v = backend(hidden.device()).head_loss(spec, config, differentiate);
  const DType dtype = compute_dtype(hidden.dtype());
  const Device device = hidden.device();
  LossParts parts{scalar(v.total, dtype, device), scalar(v.kd, dtype, device), scalar(v.ce, dtype, device),
                  scalar(v.teacher_entropy, dtype, device), count};
  if (differentiate) {
    const Tensor d_hidden = reshape(v.d_hidden, hidden.shape()), d_head = v.d_head;
    parts.total = record("head_loss", parts.total, {hidden, head, teacher_hidden, teacher_head, targets},
                         [d_hidden, d_head](const Tensor& g) {
                           return std::vector{scale_cotangent(d_hidden, g), scale_cotangent(d_head, g), Tensor(),
                                              Tensor(), Tensor()};
                         });
  }
  return parts;
}

LossParts head_loss_composed(const Tensor& hidden, const Tensor& head, const Tensor& teacher_hidden,
                             const Tensor& teacher_head, const Tensor& targets, const LossConfig& config) {
  const Tensor student_logits = matmul(hidden, transpose(head));
  Tensor teacher_logits;
  if (config.kd_ratio > 0) {
    NoGrad no_grad;
    teacher_logits = matmul(teacher_hidden, transpose(teacher_head));
  }
  return distill_loss_composed(student_logits, teacher_logits, targets, config);
}

// ---- composed ----

LossParts distill_loss_composed(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                                const LossConfig& config) {
  const Inputs in = check_inputs(student_logits, teacher_logits, targets, config);
  const DType dtype = compute_dtype(student_logits.dtype());
  const double tau = config.temperature;
  const double denom = double(std::max<int64_t>(in.count, 1));
  Tensor s = cast(in.student, dtype);  // [N, V]
  // [N]: 1 for counted tokens, 0 for ignored ones.
  Tensor counted = in.targets.defined()
                       ? ne(in.targets, scalar(double(kIgnoreIndex), in.targets.dtype(), s.device()))
                       : ones({in.rows}, DType::boolean, s.device());
  Tensor weight = cast(counted, dtype);

  Tensor kd = zeros({}, dtype, s.device()), entropy = kd, ce = kd, total = kd;
  if (in.want_kd) {
    Tensor u = cast(in.teacher, dtype);
    if (in.teacher_vocab > in.vocab) u = slice(u, 1, 0, in.vocab);
    Tensor log_q = log_softmax(tau == 1 ? s : s / tau);
    Tensor log_p = log_softmax(tau == 1 ? u : u / tau);
    Tensor p = exp(log_p);
    Tensor per_token;  // [N], KL without the tau^2
    if (config.kind == KdLoss::fkl) {
      per_token = sum(p * (log_p - log_q), {-1});
    } else if (config.kind == KdLoss::rkl) {
      per_token = sum(exp(log_q) * (log_q - log_p), {-1});
    } else {
      const double beta = config.jsd_beta;
      Tensor q = exp(log_q);
      Tensor log_m = log(p * beta + q * (1 - beta));
      per_token = sum(p * (log_p - log_m), {-1}) * beta + sum(q * (log_q - log_m), {-1}) * (1 - beta);
    }
    kd = sum(per_token * weight) * (tau * tau / denom);
    entropy = sum(neg(sum(p * log_p, {-1})) * weight) / denom;
    total = config.kd_ratio == 1 ? kd : kd * config.kd_ratio;
  }
  if (in.want_ce) {
    Tensor safe = where(counted, in.targets, zeros_like(in.targets));
    Tensor picked = gather(log_softmax(s), 1, reshape(safe, {in.rows, 1}));  // [N, 1]
    ce = neg(sum(reshape(picked, {in.rows}) * weight)) / denom;
    Tensor part = config.kd_ratio == 0 ? ce : ce * (1 - config.kd_ratio);
    total = in.want_kd ? total + part : part;
  }
  return {total, kd.detach(), ce.detach(), entropy.detach(), in.count};
}

Tensor cross_entropy_composed(const Tensor& logits, const Tensor& targets) {
  return distill_loss_composed(logits, Tensor(), targets, cross_entropy_config()).total;
}

}  // namespace cotan::train
