// The fused distillation loss launcher (kernels in kd_loss.cuh, contract in launch.hpp and
// tensor/fused_ops.hpp): three
// launches on the current stream (count the tokens, the rows, the fixed-order sum), then one
// copy of the four results to the host.
#include <type_traits>

#include "cuda/kernels/kd_loss.cuh"
#include "cuda/kernels/launch.hpp"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr const char* kOp = "kd_loss";

// x itself when contiguous, else a contiguous copy on the target in `dtype` (x's by default).
Tensor contiguous_on_target(const Tensor& x, DType dtype) {
  if (x.is_contiguous() && x.dtype() == dtype) return x;
  Tensor out = empty_tensor(x.shape(), dtype);
  launch::assign(out, x);
  return out;
}

}  // namespace

namespace launch {

KdLossResult kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& targets, const KdLossConfig& config,
                     bool want_grad, const Tensor& grad_into) {
  KdLossArgs args;
  args.want_kd = config.kd_ratio > 0;
  args.want_ce = config.kd_ratio < 1;
  check_on_target(kOp, student);
  check(student.dim() == 2 && is_floating(student.dtype()), kOp, "student logits must be floating [N, V], got ",
        student.dtype(), " ", to_string(student.shape()));
  args.rows = student.size(0);
  args.vocab = student.size(1);
  if (args.want_kd) {
    check(teacher.defined(), kOp, "the KD loss needs teacher logits");
    check_on_target(kOp, teacher);
    check(teacher.dim() == 2 && is_floating(teacher.dtype()) && teacher.size(0) == args.rows &&
              teacher.size(1) >= args.vocab,
          kOp, "teacher logits ", teacher.dtype(), " ", to_string(teacher.shape()), " do not fit the student logits ",
          to_string(student.shape()));
  }
  if (targets.defined()) {
    check_on_target(kOp, targets);
    check(targets.shape() == Shape{args.rows} && is_integral(targets.dtype()), kOp, "targets ", targets.dtype(), " ",
          to_string(targets.shape()), " do not fit the student logits ", to_string(student.shape()));
  } else {
    check(!args.want_ce, kOp, "cross-entropy needs targets");
  }
  args.kind = config.kind;
  args.tau = config.temperature;
  args.beta = config.jsd_beta;
  args.kd_ratio = config.kd_ratio;
  args.separate_ce = args.want_kd && args.want_ce && config.temperature != 1.0;

  KdLossResult result;
  if (want_grad && grad_into.defined()) {
    check_on_target(kOp, grad_into);
    check(grad_into.is_contiguous() && grad_into.shape() == student.shape() && grad_into.dtype() == student.dtype(),
          kOp, "the gradient buffer ", grad_into.dtype(), " ", to_string(grad_into.shape()),
          " is not a contiguous tensor of the student logits' shape and dtype ", student.dtype(), " ",
          to_string(student.shape()));
    result.grad = grad_into;
  } else if (want_grad) {
    result.grad = empty_tensor(student.shape(), student.dtype());
  }
  if (args.rows == 0 || args.vocab == 0) return result;  // no token: every part 0, an empty gradient

  const Tensor s = contiguous_on_target(student, student.dtype());
  const Tensor u = args.want_kd ? contiguous_on_target(teacher, teacher.dtype()) : Tensor();
  const Tensor t = targets.defined() ? contiguous_on_target(targets, DType::i64) : Tensor();
  args.teacher_stride = args.want_kd ? u.size(1) : 0;
  Tensor count = empty_tensor({1}, DType::i64);
  Tensor row_losses = empty_tensor({args.rows, 3}, DType::f64);
  Tensor sums = empty_tensor({4}, DType::f64);
  const int64_t* target_ptr = t.defined() ? static_cast<const int64_t*>(t.data_ptr()) : nullptr;
  int64_t* count_ptr = static_cast<int64_t*>(count.data_ptr());
  double* row_ptr = static_cast<double*>(row_losses.data_ptr());

  const simt::Dim3 one_block{1, 1, 1}, block{kRowBlock, 1, 1};
  simt::launch(kd_loss_count_kernel, one_block, block, 0, args.rows, target_ptr, count_ptr);
  dispatch_floating("kd_loss", s.dtype(), [&](auto s_tag) {
    using S = decltype(s_tag);
    const S* s_ptr = static_cast<const S*>(s.data_ptr());
    S* grad_ptr = want_grad ? static_cast<S*>(result.grad.data_ptr()) : nullptr;
    const LaunchSize size = row_launch<kRowBlock>(args.rows);
    // Without KD the teacher is not read: its type is the student's.
    const DType teacher_dtype = args.want_kd ? u.dtype() : s.dtype();
    dispatch_floating("kd_loss", teacher_dtype, [&](auto u_tag) {
      using U = decltype(u_tag);
      const U* u_ptr = args.want_kd ? static_cast<const U*>(u.data_ptr()) : nullptr;
      simt::launch(kd_loss_rows_kernel<S, U>, size.grid, size.block, 0, args, s_ptr, u_ptr, target_ptr,
                   static_cast<const int64_t*>(count_ptr), grad_ptr, row_ptr);
    });
  });
  simt::launch(kd_loss_sum_kernel, one_block, block, 0, args.rows, static_cast<const double*>(row_ptr),
               static_cast<const int64_t*>(count_ptr), static_cast<double*>(sums.data_ptr()));

  double host[4];
  copy_bytes(host, sums.data_ptr(), sizeof(host));
  result.kd = args.want_kd ? host[0] : 0;
  result.ce = args.want_ce ? host[1] : 0;
  result.teacher_entropy = args.want_kd ? host[2] : 0;
  result.tokens = int64_t(host[3]);
  if (args.want_kd) result.total += config.kd_ratio * result.kd;
  if (args.want_ce) result.total += (1 - config.kd_ratio) * result.ce;
  return result;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
