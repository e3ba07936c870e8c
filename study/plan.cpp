#include "study/plan.hpp"

#include <algorithm>

#include "nn/attention_kinds.hpp"
#include "nn/model.hpp"
#include "train/losses.hpp"

namespace cotan::study {

// The trainer's names, which this file uses throughout.
using namespace cotan::train;

namespace {

double bytes_of(DType d) { return double(dtype_size(d)); }

struct Widths {
  double d, q, kv, inter, heads, head_dim, layers, vocab;
};

Widths widths(const nn::ModelConfig& c) {
  const double hd = double(c.dim_per_head());
  return {double(c.hidden_size), double(c.num_heads) * hd, double(c.num_kv_heads) * hd, double(c.intermediate_size),
          double(c.num_heads), hd, double(c.num_layers), double(c.vocab_size)};
}

// Values one decoder layer saves per token for the backward pass (in compute-dtype elements).
double layer_saved_per_token(const nn::ModelConfig& c) {
  const Widths w = widths(c);
  const nn::AttentionKindInfo& kind = nn::attention_kind(c.attention.kind);
  double per = 4 * w.d + 3 * w.q + 2 * w.kv + 3 * w.inter + w.heads + 2;
  if (kind.core == CoreKind::affine) per += w.q + 3 * w.heads;
  if (kind.gated) per += 2 * w.q;
  return per;
}

double param_count(const nn::ModelConfig& c) { return double(nn::CausalLM(c).num_params()); }

}  // namespace

MemoryPlan plan_memory(const PlanInputs& in) {
  // In doubles: micro_batch x seq_len may pass int64's range in a plan of absurd sizes.
  const double n = double(in.micro_batch) * double(in.seq_len), t = double(in.seq_len);
  const double c = bytes_of(in.compute), master = bytes_of(in.master);
  const double moment = in.master == DType::f64 ? 8 : 4;
  const Widths s = widths(in.student);
  const double ps = param_count(in.student);
  MemoryPlan m;
  m.weights = master * ps;
  if (in.compute != in.master) m.compute_weights = c * ps;
  const double one_gradient = master * ps;
  m.gradients = one_gradient * (in.grad_accum > 1 ? 2 : 1);
  m.optimizer = 2 * moment * ps / double(in.zero >= 1 ? std::max<int64_t>(1, in.devices) : 1);
  if (in.teacher) m.teacher = c * param_count(*in.teacher);
  if (in.top_k > 0) m.targets = n * (double(in.top_k) * 8 + 8);

  // Saved for the backward pass.
  const double layer = n * layer_saved_per_token(in.student) + 2 * t * s.head_dim;
  // With checkpointing only each layer's input is kept; its other values come back, one layer at
  // a time, when the backward pass reaches it.
  double saved = in.checkpoint_layers ? s.layers * n * s.d : s.layers * layer;
  saved += n * (2 * s.d + 1);
  const bool fused = in.fused_head && in.top_k == 0;
  saved += fused ? s.vocab * s.d : n * s.vocab;
  m.activations = c * saved;

  // The three moments beyond the saved values.
  const double chunk = std::min<double>(n, double(kHeadChunkRows));
  double teacher_forward = 0, loss = 0;
  if (in.teacher) {
    const Widths w = widths(*in.teacher);
    teacher_forward = c * n * (3 * w.inter + 4 * w.d + w.heads);
    loss = fused ? c * (n * w.d + 2 * chunk * w.vocab + n * s.d) : c * n * (w.d + w.vocab);
  } else if (in.top_k > 0) {
    loss = 4 * n * s.vocab;  // the student's log-probabilities over the whole vocabulary
  } else {
    loss = fused ? c * (chunk * s.vocab + n * s.d) : 0;
  }
  m.loss = loss;
  const double backward = one_gradient + c * n * (3 * s.inter + 2 * s.d) + (in.checkpoint_layers ? c * layer : 0);
  m.transient = std::max({teacher_forward, loss, backward});
  m.peak_moment = m.transient == backward ? "backward" : m.transient == loss ? "loss" : "teacher forward";
  const double fixed = m.weights + m.compute_weights + (m.gradients - one_gradient) + m.optimizer + m.teacher + m.targets;
  m.peak = fixed + m.activations + m.transient;
  return m;
}

double forward_flops_per_token(const nn::ModelConfig& config, int64_t seq_len) {
  const Widths w = widths(config);
  // Every matrix but the embedding's lookup multiplies each token once; a tied head is that matrix.
  double matrix = param_count(config) - w.vocab * w.d * (config.tie_word_embeddings ? 0 : 1);
  return 2 * matrix + w.layers * 2 * double(seq_len) * w.q;
}

StepPlan plan_step(const PlanInputs& in, int64_t global_batch) {
  StepPlan p;
  p.global_batch = global_batch;
  p.tokens = double(global_batch) * double(in.seq_len);
  const double student = forward_flops_per_token(in.student, in.seq_len);
  const double teacher = in.teacher ? forward_flops_per_token(*in.teacher, in.seq_len) : 0;
  p.flops = p.tokens * ((in.checkpoint_layers ? 4 : 3) * student + teacher);
  return p;
}

}  // namespace cotan::study
