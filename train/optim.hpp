// AdamW, gradient norms and clipping, gradient accumulation and the warmup-stable-decay schedule.
//
//   AdamW opt(AdamWConfig{}, model.param_specs());
//   double g = clip_grad_norm(grads, 1.0);        // the norm before clipping (docs/losses.md)
//   opt.step(ps, grads, lr_at(schedule, step));
//
// The optimizer is also plain data and one function, as in Optimisers.jl (setup, then
// update(state, model, grads) -> (state', model')); AdamW above is a thin wrapper over them:
//
//   AdamWState st = init(config, ps);             // zero moments shaped like ps
//   std::tie(st, ps) = update(config, specs, std::move(st), std::move(ps), grads, lr);
//
// update touches only the parameters st holds moments for, so a state made from a subset of the
// parameters (one device's shard, ZeRO-1) updates that subset and passes the rest through.
//
// Updates are functional, like the rest of the model API: step() and update() replace each
// handle in `ps` with the new parameter, and a view or a copy of the old Params held elsewhere
// keeps its values. Only a tensor that nothing else holds (no other handle, no view of its
// storage) has its memory reused for the new values, as have the moments when no copy of them
// (state_tensors(), a kept AdamWState) is alive. clip_grad_norm and accumulate replace gradient
// handles the same way. Everything here runs under NoGrad on whatever device the tensors live on
// (the update is one fused pass over all parameters of a device, the rest ordinary ops), and its
// results do not depend on the number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/params.hpp"
#include "tensor/fused_ops.hpp"

namespace cotan::train {

// The update's plain data (tensor/fused_ops.hpp, tensor/adamw_element.hpp): the step's constants
// AdamWScalars<W> {shrink, beta1, one_minus_beta1, beta2, one_minus_beta2, bias2_sqrt, eps,
// step_size} and the updated AdamWTensors {p, m, v}.
using cotan::AdamWScalars;
using cotan::AdamWTensors;

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

// Throws on values outside the ranges above: "[adamw] beta1 1 is outside [0, 1)".
void validate(const AdamWConfig& config);

// Per parameter p with gradient g, at step t = state.step + 1 (PyTorch's AdamW):
//   p <- p - lr * wd * p                      decoupled weight decay, only where spec.decay
//   m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2
//   p <- p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The moments m and v are kept in f32, or in f64 for f64 parameters; bf16 parameters are
// updated in f32 and rounded back.
//
// The state: m and v by parameter name (Params-shaped) and the number of updates done. It holds
// moments for the parameters it updates, all of them or a shard.
struct AdamWState {
  nn::Params exp_avg, exp_avg_sq;  // m and v
  int64_t step = 0;
};

// Zero moments for every tensor of ps, on its device, in f32 (f64 for f64 parameters), step 0.
AdamWState init(const AdamWConfig& config, const nn::Params& ps);

// One AdamW step of the parameters `state` holds moments for, in the order of `specs` (which
// gives their shapes and decay flags; each must be declared there). Returns the new state and
// ps with those parameters replaced; other names in ps and in grads pass through or are ignored.
// grads needs a gradient of the parameter's shape for each updated name; lr must be finite and
// >= 0. Each gradient is used times grad_scale (finite, > 0): clipping folded into the update,
// the same values as clip_grad_norm's scaled gradients without writing them. Moments of another
// dtype or device (loaded ones) take the parameter's working dtype and device. A parameter or
// moment that nothing but the arguments holds (moved in) has its memory reused for the result;
// any other is left as it was. Errors name the parameter: "[adamw] no gradient for 'w'".
std::pair<AdamWState, nn::Params> update(const AdamWConfig& config, const std::vector<nn::ParamSpec>& specs,
                                         AdamWState state, nn::Params ps, const nn::Params& grads, double lr,
                                         double grad_scale = 1.0);

// "exp_avg.<param>" and "exp_avg_sq.<param>" for every moment of the state: with state.step,
// what a checkpoint saves.
nn::Params state_tensors(const AdamWState& state);
// The state of the parameters `specs` declares from state_tensors() and the step count: both
// moments of each with the parameter's shape, and no other name. Errors name the tensor.
AdamWState load_state(const std::vector<nn::ParamSpec>& specs, const nn::Params& tensors, int64_t step);

// The optimizer of a model's declared parameters, over an AdamWState that it creates at the
// first step.
class AdamW {
 public:
  AdamW(const AdamWConfig& config, std::vector<nn::ParamSpec> specs);

  // Updates every declared parameter (update() above). `grads` must hold a gradient of the
  // parameter's shape for each of them (other names in `grads` are ignored). A step that throws
  // leaves ps and the state as they were.
  void step(nn::Params& ps, const nn::Params& grads, double lr, double grad_scale = 1.0);

  // "exp_avg.<param>" and "exp_avg_sq.<param>" for every declared parameter; empty before the
  // first step. With steps(), this is what a checkpoint saves.
  nn::Params state_tensors() const;
  // Restores state_tensors() and steps(). Every moment of every declared parameter must be
  // present with the parameter's shape, and no other name; step 0 with an empty map resets.
  void load_state(const nn::Params& state, int64_t step);
  int64_t steps() const { return state_.step; }
  // No moments before the first step.
  const AdamWState& state() const { return state_; }

  const AdamWConfig& config() const { return config_; }
  const std::vector<nn::ParamSpec>& specs() const { return specs_; }

 private:
  AdamWConfig config_;
  std::vector<nn::ParamSpec> specs_;
  AdamWState state_;
};

// One tensor's AdamW update in one pass: new (p, m, v) from p, g, m, v, which must be contiguous,
// of one shape, all f32 or all f64, on one device (the backend's fused kernel,
// Backend::adamw_update). adamw_update_composed is the same math from elementwise ops, the
// oracle of the tests. update() uses the fused one.
AdamWTensors adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                          const AdamWScalars<double>& s);
AdamWTensors adamw_update_composed(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                                   const AdamWScalars<double>& s);

// The L2 norm over all gradients together, summed in f64 in the map's (name) order
// (Backend::squared_norm where the gradients live).
double global_norm(const nn::Params& grads);
// The factor clipping scales the gradients by: max_norm / (norm + 1e-6) when a finite norm
// exceeds max_norm (> 0), else 1 (a non-finite norm is left for the caller to see).
double clip_scale(double norm, double max_norm);
// Scales every gradient by clip_scale(global_norm(grads), max_norm) and returns the norm before
// clipping. (train_step passes the factor to AdamW::step instead of writing scaled gradients.)
double clip_grad_norm(nn::Params& grads, double max_norm);

// into[name] += scale * grads[name] for every gradient; a name missing from `into` starts from
// zero. The sum keeps into's dtype (scale * grads when it starts).
void accumulate(nn::Params& into, const nn::Params& grads, double scale);

// Warmup-stable-decay. With W = warmup_steps, D = round(decay_fraction * total_steps) and
// S = total_steps - D (the step the decay starts at), for step s (counted from 0):
//   s <  W:         lr * (s + 1) / W             from lr / W up to lr at s = W - 1
//   W <= s < S:     lr
//   S <= s:         min + (lr - min) * f(p),  p = min((s - S) / D, 1),  min = min_lr_ratio * lr,
//                   f(p) = 1 - p (linear) or (1 + cos(pi p)) / 2 (cosine)
// so the decay starts at lr at step S and reaches min at step total_steps, one past the last
// training step (as in HF get_wsd_schedule): no step is spent at lr 0. Needs W + D <= total_steps.
struct ScheduleConfig {
  enum class Decay { linear, cosine };
  double lr = 1e-3;
  double min_lr_ratio = 0.0;
  int64_t warmup_steps = 100;
  int64_t total_steps = 0;  // must be set
  double decay_fraction = 0.1;
  Decay decay = Decay::linear;
};

// Throws on invalid values: "[schedule] decay_fraction 1.5 is outside [0, 1]".
void validate(const ScheduleConfig& config);
int64_t decay_steps(const ScheduleConfig& config);  // D above
// The warmup a run of config.total_steps gets: warmup_steps, shrunk to what fits before the
// decay (a short run's), so that W + D <= total_steps.
int64_t effective_warmup(const ScheduleConfig& config);
double lr_at(const ScheduleConfig& config, int64_t step);

// "linear" / "cosine", and back; unknown names throw "[schedule] unknown decay 'x' (linear, cosine)".
std::string decay_name(ScheduleConfig::Decay decay);
ScheduleConfig::Decay parse_decay(const std::string& name);

}  // namespace cotan::train
