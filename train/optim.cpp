#include "train/optim.hpp"

#include <algorithm>

#include <cmath>
#include <numbers>
#include <set>
#include <string_view>
#include <utility>

#include "autograd/autograd.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::train {

namespace {

const std::string exp_avg_prefix = "exp_avg.";
const std::string exp_avg_sq_prefix = "exp_avg_sq.";

// The dtype the update and the moments use for a parameter of dtype `t`.
DType work_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

void check_unit_interval(double value, const char* name) {
  check(value >= 0.0 && value < 1.0, "adamw", name, " ", value, " is outside [0, 1)");
}

void check_step_arguments(double lr, double grad_scale) {
  check(std::isfinite(lr) && lr >= 0.0, "adamw", "learning rate ", lr, " must be finite and >= 0");
  check(std::isfinite(grad_scale) && grad_scale > 0.0, "adamw", "gradient scale ", grad_scale,
        " must be finite and positive");
}

// What one parameter's update needs from ps and grads.
void check_inputs(const nn::ParamSpec& s, const nn::Params& ps, const nn::Params& grads) {
  auto p = ps.find(s.name);
  check(p != ps.end(), "adamw", "missing parameter '", s.name, "'");
  auto g = grads.find(s.name);
  check(g != grads.end(), "adamw", "no gradient for '", s.name, "'");
  check(p->second.shape() == s.shape, "adamw", "parameter '", s.name, "' has shape ", to_string(p->second.shape()),
        " but was declared with ", to_string(s.shape));
  check(g->second.shape() == s.shape, "adamw", "gradient of '", s.name, "' has shape ", to_string(g->second.shape()),
        ", the parameter ", to_string(s.shape));
  check(is_floating(p->second.dtype()) && is_floating(g->second.dtype()), "adamw", "parameter '", s.name,
        "' and its gradient must be floating, got ", p->second.dtype(), " and ", g->second.dtype());
}

// A moment of `s` as state_tensors() names it: present, of the parameter's shape, floating.
const Tensor& checked_moment(const nn::Params& moments, const std::string& prefix, const nn::ParamSpec& s) {
  const std::string name = prefix + s.name;
  auto it = moments.find(s.name);
  check(it != moments.end(), "adamw", "optimizer state has no tensor '", name, "'");
  check(it->second.shape() == s.shape, "adamw", "optimizer state '", name, "' has shape ",
        to_string(it->second.shape()), " but the parameter has ", to_string(s.shape));
  check(is_floating(it->second.dtype()), "adamw", "optimizer state '", name, "' has dtype ", it->second.dtype());
  return it->second;
}

}  // namespace

void validate(const AdamWConfig& config) {
  check_unit_interval(config.beta1, "beta1");
  check_unit_interval(config.beta2, "beta2");
  check(std::isfinite(config.eps) && config.eps > 0.0, "adamw", "eps ", config.eps, " must be positive");
  check(std::isfinite(config.weight_decay) && config.weight_decay >= 0.0, "adamw", "weight_decay ",
        config.weight_decay, " must be >= 0");
}

AdamWState init(const AdamWConfig&, const nn::Params& ps) {
  NoGrad no_grad;
  AdamWState state;
  for (const auto& [name, p] : ps) {
    check(is_floating(p.dtype()), "adamw", "parameter '", name, "' must be floating, got ", p.dtype());
    state.exp_avg.emplace(name, zeros(p.shape(), work_dtype(p.dtype()), p.device()));
    state.exp_avg_sq.emplace(name, zeros(p.shape(), work_dtype(p.dtype()), p.device()));
  }
  return state;
}

std::pair<AdamWState, nn::Params> update(const AdamWConfig& config, const std::vector<nn::ParamSpec>& specs,
                                         AdamWState state, nn::Params ps, const nn::Params& grads, double lr,
                                         double grad_scale) {
  validate(config);
  check_step_arguments(lr, grad_scale);
  check(state.step >= 0, "adamw", "step ", state.step, " must be >= 0");
  // The parameters with moments, in the order of specs; every moment must belong to one of them.
  // Everything is checked before anything is touched.
  std::vector<const nn::ParamSpec*> updated;
  std::set<std::string_view> declared;
  for (const nn::ParamSpec& s : specs) {
    check(declared.insert(s.name).second, "adamw", "parameter '", s.name, "' is declared twice");
    if (!state.exp_avg.count(s.name) && !state.exp_avg_sq.count(s.name)) continue;
    checked_moment(state.exp_avg, exp_avg_prefix, s);
    checked_moment(state.exp_avg_sq, exp_avg_sq_prefix, s);
    check_inputs(s, ps, grads);
    updated.push_back(&s);
  }
  if (state.exp_avg.size() + state.exp_avg_sq.size() != 2 * updated.size())
    for (const auto& [prefix, moments] : {std::pair{&exp_avg_prefix, &state.exp_avg},
                                          std::pair{&exp_avg_sq_prefix, &state.exp_avg_sq}})
      for (const auto& [name, t] : *moments)
        check(declared.count(name), "adamw", "optimizer state tensor '", *prefix, name,
              "' is not of a declared parameter");

  NoGrad no_grad;
  const double t = double(state.step + 1);
  const double bias1 = 1.0 - std::pow(config.beta1, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(config.beta2, t));
  const double step_size = lr / bias1;
  const double shrink = 1.0 - lr * config.weight_decay;
  // One backend call per run of parameters on one device, each job written in place when
  // nothing but `ps` and `state` holds its tensors (see the header).
  std::vector<AdamWJob> jobs;
  jobs.reserve(updated.size());
  auto flush = [&](size_t end) {
    if (jobs.empty()) return;
    backend(jobs.front().p.device()).adamw_update_all(jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      const nn::ParamSpec& s = *updated[end - jobs.size() + i];
      Tensor& p = ps.at(s.name);
      state.exp_avg[s.name] = std::move(jobs[i].m);
      state.exp_avg_sq[s.name] = std::move(jobs[i].v);
      p = cast(jobs[i].p, p.dtype());
    }
    jobs.clear();
  };
  for (size_t i = 0; i < updated.size(); ++i) {
    const nn::ParamSpec& s = *updated[i];
    const Tensor& p = ps.at(s.name);
    if (!jobs.empty() && jobs.front().p.device() != p.device()) flush(i);
    const DType work = work_dtype(p.dtype());
    Tensor& m = state.exp_avg.at(s.name);
    Tensor& v = state.exp_avg_sq.at(s.name);
    // Loaded moments take the parameter's device and working dtype (no-ops after the first step).
    m = to(cast(m, work), p.device());
    v = to(cast(v, work), p.device());
    // A tensor may be overwritten when it is held only here (a converted p is a fresh copy).
    const bool writable = (p.dtype() != work || p.sole_owner()) && p.is_contiguous() && m.sole_owner() &&
                          m.is_contiguous() && v.sole_owner() && v.is_contiguous();
    AdamWScalars<double> k{s.decay ? shrink : 1.0,  config.beta1, 1.0 - config.beta1, config.beta2,
                           1.0 - config.beta2,          bias2_sqrt,   config.eps,         step_size};
    k.grad_scale = grad_scale;
    jobs.push_back({contiguous(cast(p, work)), contiguous(cast(grads.at(s.name), work)), m, v, k, writable});
  }
  flush(updated.size());
  ++state.step;
  return {std::move(state), std::move(ps)};
}

nn::Params state_tensors(const AdamWState& state) {
  nn::Params out;
  for (const auto& [name, m] : state.exp_avg) out.emplace(exp_avg_prefix + name, m);
  for (const auto& [name, v] : state.exp_avg_sq) out.emplace(exp_avg_sq_prefix + name, v);
  return out;
}

AdamWState load_state(const std::vector<nn::ParamSpec>& specs, const nn::Params& tensors, int64_t step) {
  check(step >= 0, "adamw", "step ", step, " must be >= 0");
  AdamWState state;
  state.step = step;
  for (const nn::ParamSpec& s : specs) {
    for (const auto& [prefix, into] :
         {std::pair{&exp_avg_prefix, &state.exp_avg}, std::pair{&exp_avg_sq_prefix, &state.exp_avg_sq}}) {
      const std::string name = *prefix + s.name;
      auto it = tensors.find(name);
      check(it != tensors.end(), "adamw", "optimizer state has no tensor '", name, "'");
      check(it->second.shape() == s.shape, "adamw", "optimizer state '", name, "' has shape ",
            to_string(it->second.shape()), " but the parameter has ", to_string(s.shape));
      check(is_floating(it->second.dtype()), "adamw", "optimizer state '", name, "' has dtype ",
            it->second.dtype());
      into->emplace(s.name, it->second.detach());
    }
  }
  if (tensors.size() != 2 * specs.size())
    for (const auto& [name, t] : tensors) {
      bool known = (name.starts_with(exp_avg_prefix) && state.exp_avg.count(name.substr(exp_avg_prefix.size()))) ||
                   (name.starts_with(exp_avg_sq_prefix) &&
                    state.exp_avg_sq.count(name.substr(exp_avg_sq_prefix.size())));
      check(known, "adamw", "unexpected optimizer state tensor '", name, "'");
    }
  return state;
}

// ---- the AdamW wrapper ----

AdamW::AdamW(const AdamWConfig& config, std::vector<nn::ParamSpec> specs)
    : config_(config), specs_(std::move(specs)) {
  validate(config_);
  std::set<std::string> seen;
  for (const nn::ParamSpec& s : specs_)
    check(seen.insert(s.name).second, "adamw", "parameter '", s.name, "' is declared twice");
}

void AdamW::step(nn::Params& ps, const nn::Params& grads, double lr, double grad_scale) {
  // Every declared parameter is checked here, before ps and the state are moved into update(),
  // so that a refused step leaves them as they were.
  check_step_arguments(lr, grad_scale);
  for (const nn::ParamSpec& s : specs_) check_inputs(s, ps, grads);
  if (state_.exp_avg.empty()) {  // the first step, or the first after a reset: zero moments
    nn::Params declared;  // extra handles of ps: gone before update(), which may reuse their memory
    for (const nn::ParamSpec& s : specs_) declared.emplace(s.name, ps.at(s.name));
    const int64_t step = state_.step;
    state_ = init(config_, declared);
    state_.step = step;
  }
  auto [state, updated] = update(config_, specs_, std::move(state_), std::move(ps), grads, lr, grad_scale);
  state_ = std::move(state);
  ps = std::move(updated);
}

nn::Params AdamW::state_tensors() const { return train::state_tensors(state_); }

void AdamW::load_state(const nn::Params& state, int64_t step) {
  check(step >= 0, "adamw", "step ", step, " must be >= 0");
  if (state.empty()) {
    check(step == 0 || specs_.empty(), "adamw", "no optimizer state to resume step ", step, " from");
    state_ = AdamWState{{}, {}, step};
    return;
  }
  state_ = train::load_state(specs_, state, step);
}

double global_norm(const nn::Params& grads) {
  NoGrad no_grad;
  // Summed where the gradients live, one backend call per run of gradients on one device, read
  // back once (one wait for a device, not one per tensor).
  std::vector<Tensor> run;
  Tensor total;
  auto flush = [&] {
    if (run.empty()) return;
    Tensor part = backend(run.front().device()).squared_norm(run);
    total = total.defined() ? total + to(part, total.device()) : part;
    run.clear();
  };
  for (const auto& [name, g] : grads) {
    check(is_floating(g.dtype()), "global_norm", "gradient '", name, "' has dtype ", g.dtype());
    if (!run.empty() && run.front().device() != g.device()) flush();
    run.push_back(g);
  }
  flush();
  return total.defined() ? std::sqrt(total.item<double>()) : 0.0;
}

AdamWTensors adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                          const AdamWScalars<double>& s) {
  for (const Tensor* t : {&p, &g, &m, &v})
    check(t->is_contiguous() && t->shape() == p.shape() && t->dtype() == p.dtype() && t->device() == p.device(),
          "adamw", "expects contiguous tensors of one shape, dtype and device, got ", t->dtype(), " ",
          to_string(t->shape()), " on ", to_string(t->device()), " and ", p.dtype(), " ", to_string(p.shape()),
          " on ", to_string(p.device()));
  check(p.dtype() == DType::f32 || p.dtype() == DType::f64, "adamw", "updates in f32 or f64, got ", p.dtype());
  return backend(p.device()).adamw_update(p, g, m, v, s);
}

AdamWTensors adamw_update_composed(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                                   const AdamWScalars<double>& s) {
  NoGrad no_grad;
  Tensor gs = s.grad_scale != 1.0 ? g * s.grad_scale : g;
  Tensor pw = s.shrink != 1.0 ? p * s.shrink : p;
  Tensor m2 = m * s.beta1 + gs * s.one_minus_beta1;
  Tensor v2 = v * s.beta2 + square(gs) * s.one_minus_beta2;
  Tensor denom = sqrt(v2) / s.bias2_sqrt + s.eps;
  return {pw - (m2 / denom) * s.step_size, m2, v2};
}

double clip_scale(double norm, double max_norm) {
  check(max_norm > 0.0, "clip_grad_norm", "max_norm ", max_norm, " must be positive");
  return std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

double clip_grad_norm(nn::Params& grads, double max_norm) {
  const double norm = global_norm(grads);
  if (const double scale = clip_scale(norm, max_norm); scale != 1.0) {
    NoGrad no_grad;
    for (auto& [name, g] : grads) g = g * scale;
  }
  return norm;
}

void accumulate(nn::Params& into, const nn::Params& grads, double scale) {
  for (const auto& [name, g] : grads) {
    auto it = into.find(name);
    if (it != into.end())
      check(it->second.shape() == g.shape(), "accumulate", "gradient '", name, "' has shape ", to_string(g.shape()),
            " but the sum has ", to_string(it->second.shape()));
    check(is_floating(g.dtype()), "accumulate", "gradient '", name, "' has dtype ", g.dtype());
  }
  NoGrad no_grad;
  for (const auto& [name, g] : grads) {
    Tensor term = scale == 1.0 ? g.detach() : g * scale;
    auto it = into.find(name);
    if (it == into.end())
      into.emplace(name, term);
    else
      it->second = it->second + cast(term, it->second.dtype());
  }
}

// ---- schedule ----

int64_t decay_steps(const ScheduleConfig& c) {
  validate(c);
  return std::llround(c.decay_fraction * double(c.total_steps));
}

void validate(const ScheduleConfig& c) {
  check(std::isfinite(c.lr) && c.lr > 0.0, "schedule", "lr ", c.lr, " must be positive");
  check(c.min_lr_ratio >= 0.0 && c.min_lr_ratio <= 1.0, "schedule", "min_lr_ratio ", c.min_lr_ratio,
        " is outside [0, 1]");
  check(c.decay_fraction >= 0.0 && c.decay_fraction <= 1.0, "schedule", "decay_fraction ", c.decay_fraction,
        " is outside [0, 1]");
  check(c.total_steps > 0, "schedule", "total_steps must be positive, got ", c.total_steps);
  check(c.warmup_steps >= 0, "schedule", "warmup_steps must be >= 0, got ", c.warmup_steps);
  const int64_t decay = std::llround(c.decay_fraction * double(c.total_steps));
  check(c.warmup_steps + decay <= c.total_steps, "schedule", "warmup_steps ", c.warmup_steps, " plus ", decay,
        " decay steps exceed total_steps ", c.total_steps);
}

int64_t effective_warmup(const ScheduleConfig& c) {
  const int64_t decay = std::llround(c.decay_fraction * double(c.total_steps));  // D, before validate() holds
  return std::clamp<int64_t>(c.warmup_steps, 0, std::max<int64_t>(0, c.total_steps - decay));
}

double lr_at(const ScheduleConfig& c, int64_t step) {
  check(step >= 0, "schedule", "step ", step, " is negative");
  const int64_t decay = decay_steps(c);
  const int64_t decay_start = c.total_steps - decay;
  if (step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  if (step < decay_start || decay == 0) return c.lr;
  const double min_lr = c.min_lr_ratio * c.lr;
  const double p = std::min(double(step - decay_start) / double(decay), 1.0);
  const double f = c.decay == ScheduleConfig::Decay::linear ? 1.0 - p : 0.5 * (1.0 + std::cos(std::numbers::pi * p));
  return min_lr + (c.lr - min_lr) * f;
}

std::string decay_name(ScheduleConfig::Decay decay) {
  return decay == ScheduleConfig::Decay::linear ? "linear" : "cosine";
}

ScheduleConfig::Decay parse_decay(const std::string& name) {
  if (name == "linear") return ScheduleConfig::Decay::linear;
  if (name == "cosine") return ScheduleConfig::Decay::cosine;
  fail("schedule", "unknown decay '", name, "' (linear, cosine)");
}

}  // namespace cotan::train
