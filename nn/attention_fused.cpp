// The fused attention op (nn/attention.hpp): the core's checks, one autograd node, and the
// backend's kernels (Backend::attention_forward and attention_backward, tensor/fused_ops.hpp:
// tensor/cpu/attention.cpp on the CPU, cuda/kernels/attention.cu on a CUDA device or the emulator
// serving one). Cores of a dtype the backend has no kernel for (f64 on CUDA) take the composed
// path. Also the helpers that list and replace a core's differentiable inputs.
#include <memory>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/attention.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

AttentionSpec core_spec(const AttentionCore& core) {
  AttentionSpec spec;
  spec.kind = core.alpha.defined() ? CoreKind::affine : core.sigma.defined() ? CoreKind::sink : CoreKind::softmax;
  auto off_tape = [](const Tensor& x) { return x.defined() ? x.detach() : x; };
  spec.q = off_tape(core.q);
  spec.k = off_tape(core.k);
  spec.v = off_tape(core.v);
  spec.alpha = off_tape(core.alpha);
  spec.alpha_ma = off_tape(core.alpha_ma);
  spec.sigma = off_tape(core.sigma);
  spec.causal = core.causal;
  spec.affine_n = core.affine_n;
  return spec;
}

std::vector<Tensor> differentiable_inputs(const AttentionCore& core) {
  std::vector<Tensor> xs{core.q, core.k, core.v};
  if (core.alpha.defined()) xs.push_back(core.alpha);
  if (core.sigma.defined()) xs.push_back(core.sigma);
  return xs;
}

AttentionCore with_differentiable_inputs(AttentionCore core, const std::vector<Tensor>& xs) {
  const size_t want = differentiable_inputs(core).size();
  check(xs.size() == want, "attention", "the core takes ", want, " differentiable inputs, got ", xs.size());
  core.q = xs[0];
  core.k = xs[1];
  core.v = xs[2];
  size_t at = 3;
  if (core.alpha.defined()) core.alpha = xs[at++];
  if (core.sigma.defined()) core.sigma = xs[at++];
  return core;
}

AttentionCore cast(AttentionCore core, DType dtype) {
  for (Tensor* x : {&core.q, &core.k, &core.v, &core.alpha, &core.alpha_ma, &core.sigma})
    if (x->defined()) *x = cotan::cast(*x, dtype);
  return core;
}

Tensor attention_fused(const AttentionCore& in) {
  check_attention_core(in, "attention");
  Backend* kernels = &backend(in.q.device());
  const DType dt = in.q.dtype();
  if (!kernels->has_attention_kernel(dt)) return attention_composed(in);
  auto core = std::make_shared<const AttentionSpec>(core_spec(in));
  auto saved = std::make_shared<const AttentionForward>(kernels->attention_forward(*core));
  return record("attention", saved->o, differentiable_inputs(in), [kernels, core, saved, dt](const Tensor& cotangent) {
    // The cotangent as it comes (the permute after the core hands back a strided view): each
    // backend reads or copies it as its kernels need.
    AttentionGrads g = kernels->attention_backward(*core, *saved, cast(cotangent, dt));
    std::vector<Tensor> grads{g.dq, g.dk, g.dv};
    if (core->kind == CoreKind::affine) grads.push_back(g.dalpha);
    if (core->kind == CoreKind::sink) grads.push_back(g.dsigma);
    return grads;
  });
}

}  // namespace cotan::nn
