// AdamW against a scalar reference, the functional update (init, update, the checkpoint tensors)
// against AdamW::step and on a subset of the parameters, optimizer state round trips, gradient
// norms, clipping, accumulation and the warmup-stable-decay schedule.
#include "train/optim.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <tuple>

#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::train;

namespace {

// Two parameters: a decayed weight and an undecayed norm, the second with tiny gradients so that
// eps matters.
std::vector<nn::ParamSpec> specs() {
  return {{"layer.weight", {2, 3}, nn::Init::normal, true}, {"norm.weight", {3}, nn::Init::ones, false}};
}

std::vector<double> start_values(const nn::ParamSpec& s) {
  std::vector<double> v(size_t(numel(s.shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = s.decay ? 0.5 - 0.25 * double(i) : 1.0 + 0.1 * double(i);
  return v;
}

std::vector<double> grad_values(const nn::ParamSpec& s, int step) {
  std::vector<double> g(size_t(numel(s.shape)));
  for (size_t i = 0; i < g.size(); ++i) {
    const double wave = std::sin(0.7 * double(i) + 1.3 * double(step) + (s.decay ? 0.0 : 2.0));
    g[i] = s.decay ? wave : 3e-9 * wave;
  }
  return g;
}

nn::Params make_params(const std::vector<nn::ParamSpec>& ss, DType dtype,
                       std::vector<double> (*values)(const nn::ParamSpec&, int), int step) {
  nn::Params ps;
  for (const auto& s : ss) {
    const auto v = values(s, step);
    ps[s.name] = cast(from_vector<double>(v, s.shape), dtype);
  }
  return ps;
}

std::vector<double> start_values_at(const nn::ParamSpec& s, int) { return start_values(s); }

// The textbook form with bias-corrected moments, in f64.
struct ReferenceAdamW {
  AdamWConfig c;
  std::map<std::string, std::vector<double>> p, m, v;
  int t = 0;

  void step(const std::vector<nn::ParamSpec>& ss, int grad_step, double lr) {
    ++t;
    for (const auto& s : ss) {
      auto& pv = p[s.name];
      auto& mv = m[s.name];
      auto& vv = v[s.name];
      mv.resize(pv.size(), 0.0), vv.resize(pv.size(), 0.0);
      const auto g = grad_values(s, grad_step);
      for (size_t i = 0; i < pv.size(); ++i) {
        if (s.decay) pv[i] -= lr * c.weight_decay * pv[i];
        mv[i] = c.beta1 * mv[i] + (1 - c.beta1) * g[i];
        vv[i] = c.beta2 * vv[i] + (1 - c.beta2) * g[i] * g[i];
        const double m_hat = mv[i] / (1 - std::pow(c.beta1, t));
        const double v_hat = vv[i] / (1 - std::pow(c.beta2, t));
        pv[i] -= lr * m_hat / (std::sqrt(v_hat) + c.eps);
      }
    }
  }
};

const double lrs[] = {1e-2, 3e-2, 2e-2, 5e-3, 1e-2};

void check_against_reference(DType dtype, double tolerance) {
  const auto ss = specs();
  AdamWConfig config;
  config.weight_decay = 0.5;  // large, so that a missing or misplaced decay shows
  AdamW opt(config, ss);
  ReferenceAdamW ref{config, {}, {}, {}, 0};
  for (const auto& s : ss) ref.p[s.name] = start_values(s);
  nn::Params ps = make_params(ss, dtype, start_values_at, 0);
  for (int t = 0; t < 5; ++t) {
    opt.step(ps, make_params(ss, dtype, grad_values, t), lrs[t]);
    ref.step(ss, t, lrs[t]);
    for (const auto& s : ss) {
      CHECK(ps.at(s.name).dtype() == dtype);
      const auto got = ps.at(s.name).to_vector<double>();
      const auto& want = ref.p.at(s.name);
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tolerance));
    }
  }
  CHECK(opt.steps() == 5);
  // The moments too, in f64 for f64 parameters and in f32 otherwise.
  const nn::Params state = opt.state_tensors();
  for (const auto& s : ss) {
    const Tensor m = state.at("exp_avg." + s.name), v = state.at("exp_avg_sq." + s.name);
    CHECK(m.dtype() == (dtype == DType::f64 ? DType::f64 : DType::f32));
    const auto mv = m.to_vector<double>(), vv = v.to_vector<double>();
    for (size_t i = 0; i < mv.size(); ++i) {
      CHECK(mv[i] == doctest::Approx(ref.m.at(s.name)[i]).epsilon(tolerance));
      CHECK(vv[i] == doctest::Approx(ref.v.at(s.name)[i]).epsilon(tolerance));
    }
  }
}

}  // namespace

TEST_CASE("adamw: f64 parameters follow the scalar reference (decay, bias correction, eps)") {
  check_against_reference(DType::f64, 1e-12);
}

TEST_CASE("adamw: f32 parameters follow the scalar reference") { check_against_reference(DType::f32, 2e-5); }

TEST_CASE("adamw: the first step moves each element by about lr, decay only where declared") {
  // At t = 1, m_hat / sqrt(v_hat) = sign(g): every element moves by lr (less eps), plus decay.
  std::vector<nn::ParamSpec> ss = {{"a", {2}, nn::Init::normal, true}, {"b", {2}, nn::Init::normal, false}};
  AdamW opt(AdamWConfig{0.9, 0.95, 1e-8, 0.1}, ss);
  nn::Params ps = {{"a", from_vector<double>({1.0, -2.0}, {2})}, {"b", from_vector<double>({1.0, -2.0}, {2})}};
  nn::Params grads = {{"a", from_vector<double>({0.3, -5.0}, {2})}, {"b", from_vector<double>({0.3, -5.0}, {2})}};
  opt.step(ps, grads, 0.01);
  const auto a = ps.at("a").to_vector<double>(), b = ps.at("b").to_vector<double>();
  CHECK(a[0] == doctest::Approx(1.0 * (1 - 0.001) - 0.01).epsilon(1e-9));
  CHECK(a[1] == doctest::Approx(-2.0 * (1 - 0.001) + 0.01).epsilon(1e-9));
  CHECK(b[0] == doctest::Approx(1.0 - 0.01).epsilon(1e-9));
  CHECK(b[1] == doctest::Approx(-2.0 + 0.01).epsilon(1e-9));
}

TEST_CASE("adamw: updates replace the handles and never write the old tensors") {
  std::vector<nn::ParamSpec> ss = {{"w", {3}, nn::Init::normal, true}};
  AdamW opt(AdamWConfig{}, ss);
  const Tensor before = from_vector<float>({1, 2, 3}, {3});
  nn::Params ps = {{"w", before}};
  opt.step(ps, {{"w", from_vector<float>({1, 1, 1}, {3})}}, 0.1);
  CHECK_FALSE(ps.at("w").same_storage(before));
  CHECK(before.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK_FALSE(ps.at("w").tracked());
}

TEST_CASE("adamw: bf16 parameters keep their dtype, moments are f32") {
  std::vector<nn::ParamSpec> ss = {{"w", {4}, nn::Init::normal, true}};
  AdamW opt(AdamWConfig{}, ss);
  nn::Params ps = {{"w", cast(from_vector<float>({1, 2, 3, 4}, {4}), DType::bf16)}};
  opt.step(ps, {{"w", cast(from_vector<float>({1, -1, 1, -1}, {4}), DType::bf16)}}, 0.125);
  CHECK(ps.at("w").dtype() == DType::bf16);
  CHECK(opt.state_tensors().at("exp_avg.w").dtype() == DType::f32);
  const auto w = ps.at("w").to_vector<float>();
  CHECK(w[0] == doctest::Approx(1 * (1 - 0.0125) - 0.125).epsilon(1e-2));
  CHECK(w[1] == doctest::Approx(2 * (1 - 0.0125) + 0.125).epsilon(1e-2));
}

TEST_CASE("adamw: saving and loading the state resumes bit for bit") {
  const auto ss = specs();
  AdamW straight(AdamWConfig{}, ss), first(AdamWConfig{}, ss);
  nn::Params a = make_params(ss, DType::f32, start_values_at, 0);
  nn::Params b = a;
  for (int t = 0; t < 5; ++t) straight.step(a, make_params(ss, DType::f32, grad_values, t), lrs[t]);
  for (int t = 0; t < 3; ++t) first.step(b, make_params(ss, DType::f32, grad_values, t), lrs[t]);

  const nn::Params state = first.state_tensors();
  CHECK(state.size() == 4);
  CHECK(state.count("exp_avg.layer.weight") == 1);
  CHECK(state.count("exp_avg_sq.norm.weight") == 1);
  AdamW resumed(AdamWConfig{}, ss);
  resumed.load_state(state, first.steps());
  CHECK(resumed.steps() == 3);
  for (int t = 3; t < 5; ++t) resumed.step(b, make_params(ss, DType::f32, grad_values, t), lrs[t]);
  for (const auto& s : ss) CHECK(a.at(s.name).to_vector<float>() == b.at(s.name).to_vector<float>());
}

TEST_CASE("adamw: errors") {
  const auto ss = specs();
  CHECK(error_of([&] { AdamW(AdamWConfig{1.0, 0.95, 1e-8, 0.1}, ss); }) == "[adamw] beta1 1 is outside [0, 1)");
  CHECK(error_of([&] { AdamW(AdamWConfig{0.9, 0.95, 0.0, 0.1}, ss); }) == "[adamw] eps 0 must be positive");
  CHECK(error_of([&] { AdamW(AdamWConfig{0.9, 0.95, 1e-8, -1}, ss); }) == "[adamw] weight_decay -1 must be >= 0");

  AdamW opt(AdamWConfig{}, ss);
  nn::Params ps = make_params(ss, DType::f32, start_values_at, 0);
  nn::Params grads = make_params(ss, DType::f32, grad_values, 0);
  nn::Params missing = grads;
  missing.erase("norm.weight");
  CHECK(error_of([&] { opt.step(ps, missing, 0.1); }) == "[adamw] no gradient for 'norm.weight'");
  nn::Params wrong = grads;
  wrong["norm.weight"] = zeros({4});
  CHECK(error_of([&] { opt.step(ps, wrong, 0.1); }) ==
        "[adamw] gradient of 'norm.weight' has shape [4], the parameter [3]");
  CHECK(error_of([&] { opt.step(ps, grads, -1.0); }) == "[adamw] learning rate -1 must be finite and >= 0");
  CHECK(opt.steps() == 0);  // failed steps change nothing

  opt.step(ps, grads, 0.1);
  nn::Params state = opt.state_tensors();
  nn::Params partial = state;
  partial.erase("exp_avg_sq.layer.weight");
  CHECK(error_of([&] { opt.load_state(partial, 1); }) ==
        "[adamw] optimizer state has no tensor 'exp_avg_sq.layer.weight'");
  nn::Params extra = state;
  extra["exp_avg.other"] = zeros({1});
  CHECK(error_of([&] { opt.load_state(extra, 1); }) == "[adamw] unexpected optimizer state tensor 'exp_avg.other'");
  CHECK(error_of([&] { opt.load_state({}, 4); }) == "[adamw] no optimizer state to resume step 4 from");
  opt.load_state({}, 0);
  CHECK(opt.steps() == 0);
  CHECK(opt.state_tensors().empty());
}

namespace {

// Whether a and b hold the same names with the same dtypes and bits.
bool same_bits(const nn::Params& a, const nn::Params& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.dtype() != t.dtype() || it->second.shape() != t.shape()) return false;
    if (cast(t, DType::f64).to_vector<double>() != cast(it->second, DType::f64).to_vector<double>()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("update: the functional form equals AdamW::step bit for bit, moments included") {
  const auto ss = specs();
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    CAPTURE(dtype);
    AdamWConfig config;
    config.weight_decay = 0.5;
    AdamW opt(config, ss);
    nn::Params a = make_params(ss, dtype, start_values_at, 0), b = make_params(ss, dtype, start_values_at, 0);
    AdamWState state = init(config, b);
    CHECK(state.step == 0);
    CHECK(state.exp_avg.at("layer.weight").dtype() == (dtype == DType::f64 ? DType::f64 : DType::f32));
    CHECK(max(abs(state.exp_avg_sq.at("norm.weight"))).item<double>() == 0.0);
    for (int t = 0; t < 5; ++t) {
      const nn::Params grads = make_params(ss, dtype, grad_values, t);
      const double scale = t % 2 ? 0.37 : 1.0;
      opt.step(a, grads, lrs[t], scale);
      std::tie(state, b) = update(config, ss, std::move(state), std::move(b), grads, lrs[t], scale);
      CHECK(same_bits(a, b));
      CHECK(state.step == opt.steps());
      CHECK(same_bits(state_tensors(state), opt.state_tensors()));
    }
  }
}

TEST_CASE("update: a state of some parameters updates those alone, as the full update does") {
  // The shard holds one of the two parameters and gets only its gradient; the other parameter
  // passes through untouched.
  const auto ss = specs();
  AdamWConfig config;
  nn::Params full = make_params(ss, DType::f32, start_values_at, 0), part = full;
  AdamWState full_state = init(config, full);
  AdamWState part_state = init(config, {{"norm.weight", part.at("norm.weight")}});
  const Tensor other = part.at("layer.weight");
  for (int t = 0; t < 4; ++t) {
    const nn::Params grads = make_params(ss, DType::f32, grad_values, t);
    std::tie(full_state, full) = update(config, ss, std::move(full_state), std::move(full), grads, lrs[t]);
    std::tie(part_state, part) =
        update(config, ss, std::move(part_state), std::move(part), {{"norm.weight", grads.at("norm.weight")}}, lrs[t]);
  }
  CHECK(part_state.step == 4);
  CHECK(part_state.exp_avg.size() == 1);
  CHECK(part_state.exp_avg_sq.size() == 1);
  CHECK(same_bits({{"w", part.at("norm.weight")}}, {{"w", full.at("norm.weight")}}));
  CHECK(same_bits({{"m", part_state.exp_avg.at("norm.weight")}}, {{"m", full_state.exp_avg.at("norm.weight")}}));
  CHECK(same_bits({{"v", part_state.exp_avg_sq.at("norm.weight")}},
                  {{"v", full_state.exp_avg_sq.at("norm.weight")}}));
  CHECK(part.at("layer.weight").same_storage(other));
  CHECK(part.at("layer.weight").to_vector<double>() == start_values(ss[0]));
}

TEST_CASE("update: the state round trips through the checkpoint tensors and resumes bit for bit") {
  const auto ss = specs();
  AdamWConfig config;
  nn::Params a = make_params(ss, DType::f32, start_values_at, 0);
  AdamWState state = init(config, a);
  for (int t = 0; t < 3; ++t)
    std::tie(state, a) = update(config, ss, std::move(state), std::move(a), make_params(ss, DType::f32, grad_values, t), lrs[t]);
  const nn::Params saved = state_tensors(state);
  CHECK(saved.size() == 4);
  CHECK(saved.count("exp_avg.layer.weight") == 1);
  CHECK(saved.count("exp_avg_sq.norm.weight") == 1);
  AdamWState loaded = load_state(ss, saved, state.step);
  CHECK(loaded.step == 3);
  CHECK(same_bits(loaded.exp_avg, state.exp_avg));
  CHECK(same_bits(loaded.exp_avg_sq, state.exp_avg_sq));
  // The checkpoint of a shard: its parameters' moments alone.
  const std::vector<nn::ParamSpec> shard = {ss[1]};
  AdamWState part = load_state(shard, {{"exp_avg.norm.weight", saved.at("exp_avg.norm.weight")},
                                       {"exp_avg_sq.norm.weight", saved.at("exp_avg_sq.norm.weight")}}, 3);
  CHECK(part.exp_avg.size() == 1);
  CHECK(error_of([&] { load_state(shard, saved, 3); }) == "[adamw] unexpected optimizer state tensor 'exp_avg.layer.weight'");

  nn::Params b = a;
  for (int t = 3; t < 5; ++t) {
    const nn::Params grads = make_params(ss, DType::f32, grad_values, t);
    std::tie(state, a) = update(config, ss, std::move(state), std::move(a), grads, lrs[t]);
    std::tie(loaded, b) = update(config, ss, std::move(loaded), std::move(b), grads, lrs[t]);
  }
  CHECK(same_bits(a, b));
}

TEST_CASE("update: a state or parameters held elsewhere keep their values") {
  const auto ss = specs();
  AdamWConfig config;
  const nn::Params ps = make_params(ss, DType::f32, start_values_at, 0);
  const AdamWState state = init(config, ps);
  auto [next, updated] = update(config, ss, state, ps, make_params(ss, DType::f32, grad_values, 0), 1e-2);
  CHECK(next.step == 1);
  CHECK(state.step == 0);
  CHECK(max(abs(state.exp_avg.at("layer.weight"))).item<double>() == 0.0);
  CHECK(max(abs(next.exp_avg.at("layer.weight"))).item<double>() > 0.0);
  CHECK(ps.at("layer.weight").to_vector<double>() == start_values(ss[0]));
  CHECK(!updated.at("layer.weight").same_storage(ps.at("layer.weight")));
}

TEST_CASE("update: errors name the parameter") {
  const auto ss = specs();
  AdamWConfig config;
  const nn::Params ps = make_params(ss, DType::f32, start_values_at, 0);
  const nn::Params grads = make_params(ss, DType::f32, grad_values, 0);
  const AdamWState state = init(config, ps);
  nn::Params missing = grads;
  missing.erase("norm.weight");
  CHECK(error_of([&] { update(config, ss, state, ps, missing, 0.1); }) == "[adamw] no gradient for 'norm.weight'");
  nn::Params wrong = grads;
  wrong["norm.weight"] = zeros({4});
  CHECK(error_of([&] { update(config, ss, state, ps, wrong, 0.1); }) ==
        "[adamw] gradient of 'norm.weight' has shape [4], the parameter [3]");
  nn::Params no_param = ps;
  no_param.erase("layer.weight");
  CHECK(error_of([&] { update(config, ss, state, no_param, grads, 0.1); }) == "[adamw] missing parameter 'layer.weight'");
  AdamWState odd = state;
  odd.exp_avg["other"] = zeros({1});
  CHECK(error_of([&] { update(config, ss, odd, ps, grads, 0.1); }) ==
        "[adamw] optimizer state tensor 'exp_avg.other' is not of a declared parameter");
  AdamWState half = state;
  half.exp_avg_sq.erase("norm.weight");
  CHECK(error_of([&] { update(config, ss, half, ps, grads, 0.1); }) ==
        "[adamw] optimizer state has no tensor 'exp_avg_sq.norm.weight'");
  AdamWState misshapen = state;
  misshapen.exp_avg["layer.weight"] = zeros({3, 2});
  CHECK(error_of([&] { update(config, ss, misshapen, ps, grads, 0.1); }) ==
        "[adamw] optimizer state 'exp_avg.layer.weight' has shape [3, 2] but the parameter has [2, 3]");
  CHECK(error_of([&] { update(AdamWConfig{0.9, 1.5, 1e-8, 0.1}, ss, state, ps, grads, 0.1); }) ==
        "[adamw] beta2 1.5 is outside [0, 1)");
  CHECK(error_of([&] { update(config, ss, state, ps, grads, 0.1, -2.0); }) ==
        "[adamw] gradient scale -2 must be finite and positive");
  CHECK(error_of([&] { init(config, {{"ids", zeros({2}, DType::i64)}}); }) ==
        "[adamw] parameter 'ids' must be floating, got i64");
}

TEST_CASE("adamw_update: the fused pass equals the composed update") {
  Generator gen(17);
  const AdamWScalars<double> k{1.0 - 3e-3 * 0.1, 0.9, 0.1, 0.95, 0.05, std::sqrt(1 - std::pow(0.95, 3.0)), 1e-8,
                               3e-3 / (1 - std::pow(0.9, 3.0))};
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(dtype);
    // 70,000 elements: several parallel chunks. v >= 0, as a second moment is.
    const Shape shape{70, 1000};
    Tensor p = randn(shape, gen, dtype), g = randn(shape, gen, dtype), m = randn(shape, gen, dtype) * 0.1;
    Tensor v = square(randn(shape, gen, dtype)) * 0.01;
    for (double shrink : {k.shrink, 1.0}) {
      AdamWScalars<double> ks = k;
      ks.shrink = shrink;
      const AdamWTensors fused = adamw_update(p, g, m, v, ks), composed = adamw_update_composed(p, g, m, v, ks);
      const double tol = dtype == DType::f64 ? 1e-14 : 1e-6;
      for (auto [a, b] : {std::pair{fused.p, composed.p}, {fused.m, composed.m}, {fused.v, composed.v}}) {
        CHECK(a.dtype() == dtype);
        CHECK(max(abs(a - b)).item<double>() <= tol * max(abs(b)).item<double>());
      }
      // The inputs are never written.
      CHECK(!fused.p.same_storage(p));
    }
  }
  Tensor x = zeros({3}), y = zeros({4});
  CHECK(error_of([&] { adamw_update(x, y, x, x, k); }).starts_with("[adamw] expects contiguous tensors of one shape"));
  Tensor h = zeros({3}, DType::bf16);
  CHECK(error_of([&] { adamw_update(h, h, h, h, k); }) == "[adamw] updates in f32 or f64, got bf16");
}

TEST_CASE("adamw_update_all: every parameter in one pass, in place where allowed") {
  Generator gen(23);
  // f32 and f64 jobs, one across several chunks, one of a single element; with and without
  // decay, with a clipping scale.
  std::vector<AdamWJob> jobs, reference;
  const std::vector<std::pair<Shape, DType>> params{
      {{40, 1000}, DType::f32}, {{1}, DType::f32}, {{300, 70}, DType::f64}, {{129}, DType::f32}};
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [shape, dtype] = params[i];
    AdamWScalars<double> k{i % 2 ? 1.0 : 1.0 - 3e-3 * 0.1, 0.9, 0.1, 0.95, 0.05, std::sqrt(1 - std::pow(0.95, 2.0)),
                           1e-8, 3e-3 / (1 - std::pow(0.9, 2.0))};
    k.grad_scale = i == 2 ? 1.0 : 0.37;
    Tensor p = randn(shape, gen, dtype), g = randn(shape, gen, dtype), m = randn(shape, gen, dtype) * 0.1;
    Tensor v = square(randn(shape, gen, dtype)) * 0.01;
    jobs.push_back({contiguous(p + 0.0), g, contiguous(m + 0.0), contiguous(v + 0.0), k, i % 2 == 0});
    reference.push_back({p, g, m, v, k, false});
  }
  const std::vector<AdamWJob> before = jobs;  // holds the inputs: their values must survive
  std::vector<Tensor> inputs;
  for (const AdamWJob& j : jobs) inputs.push_back(contiguous(j.p + 0.0));
  cpu_backend().adamw_update_all(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(i);
    const AdamWJob& r = reference[i];
    // The composed update with the gradient scaled first, as clip_grad_norm's g * scale.
    const AdamWTensors want = adamw_update_composed(r.p, r.g, r.m, r.v, r.s);
    const double tol = r.p.dtype() == DType::f64 ? 1e-14 : 1e-6;
    for (auto [a, b] : {std::pair{jobs[i].p, want.p}, {jobs[i].m, want.m}, {jobs[i].v, want.v}})
      CHECK(max(abs(a - b)).item<double>() <= tol * max(abs(b)).item<double>());
    // In place exactly where the job allows it; otherwise the inputs keep their values.
    CHECK(jobs[i].p.same_storage(before[i].p) == before[i].in_place);
    CHECK(jobs[i].m.same_storage(before[i].m) == before[i].in_place);
    if (!before[i].in_place) CHECK(max(abs(before[i].p - inputs[i])).item<double>() == 0.0);
  }
}

TEST_CASE("AdamW::step: a clipping scale equals clipped gradients; held parameters keep their values") {
  const std::vector<nn::ParamSpec> ss = specs();
  AdamW folded(AdamWConfig{}, ss), clipped(AdamWConfig{}, ss);
  nn::Params a = make_params(ss, DType::f32, start_values_at, 0), b = make_params(ss, DType::f32, start_values_at, 0);
  for (int step = 0; step < 3; ++step) {
    nn::Params grads;
    for (const nn::ParamSpec& s : ss) grads[s.name] = cast(from_vector<double>(grad_values(s, step), s.shape), DType::f32) * 40.0;
    const nn::Params held = a;  // a copy of the old parameters: the update must not write them
    std::map<std::string, std::vector<double>> old_values;
    for (const auto& [name, t] : held) old_values[name] = t.to_vector<double>();
    const double norm = global_norm(grads);
    REQUIRE(clip_scale(norm, 1.0) < 1.0);
    folded.step(a, grads, 1e-2, clip_scale(norm, 1.0));
    nn::Params scaled = grads;
    clip_grad_norm(scaled, 1.0);
    std::map<std::string, const void*> b_memory;  // nothing else holds b: updated in place
    for (const auto& [name, t] : b) b_memory[name] = t.storage()->data;
    clipped.step(b, scaled, 1e-2);
    for (const auto& [name, t] : b) CHECK(t.storage()->data == b_memory[name]);
    for (const auto& [name, t] : a) {
      CAPTURE(name);
      CHECK(max(abs(t - b.at(name))).item<double>() == 0.0);
      CHECK(held.at(name).to_vector<double>() == old_values[name]);
      CHECK(!t.same_storage(held.at(name)));
    }
  }
  CHECK(error_of([&] { folded.step(a, {}, 1e-2, 0.0); }) == "[adamw] gradient scale 0 must be finite and positive");
}

TEST_CASE("global_norm and clip_grad_norm") {
  nn::Params grads = {{"a", from_vector<float>({3, 4}, {2})}, {"b", from_vector<double>({12}, {1})}};
  CHECK(global_norm(grads) == 13.0);

  nn::Params small = grads;
  CHECK(clip_grad_norm(small, 20.0) == 13.0);
  CHECK(small.at("a").same_storage(grads.at("a")));  // untouched below the limit

  nn::Params clipped = grads;
  CHECK(clip_grad_norm(clipped, 6.5) == 13.0);
  const double scale = 6.5 / (13.0 + 1e-6);
  CHECK(clipped.at("a").dtype() == DType::f32);
  CHECK(clipped.at("a").to_vector<double>()[1] == doctest::Approx(4 * scale).epsilon(1e-7));
  CHECK(clipped.at("b").to_vector<double>()[0] == doctest::Approx(12 * scale).epsilon(1e-12));
  CHECK(global_norm(clipped) == doctest::Approx(6.5).epsilon(1e-6));
  CHECK(grads.at("b").to_vector<double>()[0] == 12.0);  // the originals are unchanged

  CHECK(global_norm({}) == 0.0);
  CHECK(error_of([&] { clip_grad_norm(clipped, 0.0); }) == "[clip_grad_norm] max_norm 0 must be positive");
  nn::Params bad = {{"x", from_vector<float>({NAN}, {1})}};
  CHECK(std::isnan(clip_grad_norm(bad, 1.0)));
}

TEST_CASE("accumulate: into += scale * grads") {
  nn::Params sum;
  accumulate(sum, {{"w", from_vector<float>({1, 2}, {2})}}, 0.5);
  accumulate(sum, {{"w", from_vector<float>({4, 6}, {2})}, {"b", from_vector<float>({1}, {1})}}, 0.5);
  CHECK(sum.at("w").to_vector<float>() == std::vector<float>{2.5, 4});
  CHECK(sum.at("b").to_vector<float>() == std::vector<float>{0.5});
  CHECK(error_of([&] { accumulate(sum, {{"b", zeros({2})}}, 1.0); }) ==
        "[accumulate] gradient 'b' has shape [2] but the sum has [1]");
}

TEST_CASE("schedule: warmup, stable and decay values at key steps") {
  ScheduleConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 100;
  c.total_steps = 1000;
  c.decay_fraction = 0.1;  // the decay runs over [900, 1000)
  CHECK(decay_steps(c) == 100);
  CHECK(lr_at(c, 0) == doctest::Approx(1e-5));    // lr / warmup
  CHECK(lr_at(c, 49) == doctest::Approx(5e-4));
  CHECK(lr_at(c, 99) == doctest::Approx(1e-3));   // the end of the warmup
  CHECK(lr_at(c, 100) == 1e-3);
  CHECK(lr_at(c, 500) == 1e-3);
  CHECK(lr_at(c, 900) == 1e-3);                   // the decay starts at the peak
  CHECK(lr_at(c, 925) == doctest::Approx(0.75e-3));
  CHECK(lr_at(c, 950) == doctest::Approx(0.5e-3));
  CHECK(lr_at(c, 999) == doctest::Approx(1e-5));
  CHECK(lr_at(c, 1000) == 0.0);
  CHECK(lr_at(c, 5000) == 0.0);

  c.min_lr_ratio = 0.1;
  CHECK(lr_at(c, 950) == doctest::Approx(1e-4 + 0.9e-3 * 0.5));
  CHECK(lr_at(c, 1000) == doctest::Approx(1e-4));

  c.decay = ScheduleConfig::Decay::cosine;
  const double quarter = (1 + std::numbers::sqrt2 / 2) / 2;  // (1 + cos(pi / 4)) / 2
  CHECK(lr_at(c, 900) == doctest::Approx(1e-3));
  CHECK(lr_at(c, 925) == doctest::Approx(1e-4 + 0.9e-3 * quarter));
  CHECK(lr_at(c, 950) == doctest::Approx(1e-4 + 0.9e-3 * 0.5));
  CHECK(lr_at(c, 975) == doctest::Approx(1e-4 + 0.9e-3 * (1 - quarter)));
  CHECK(lr_at(c, 1000) == doctest::Approx(1e-4));
  CHECK(lr_at(c, 50) == doctest::Approx(0.51e-3));  // the warmup does not depend on the decay

  ScheduleConfig flat{2e-3, 0.0, 0, 10, 0.0, ScheduleConfig::Decay::linear};
  CHECK(lr_at(flat, 0) == 2e-3);
  CHECK(lr_at(flat, 20) == 2e-3);
  CHECK(parse_decay("cosine") == ScheduleConfig::Decay::cosine);
  CHECK(decay_name(ScheduleConfig::Decay::linear) == "linear");
}

TEST_CASE("schedule: errors") {
  ScheduleConfig c;
  c.total_steps = 1000;
  c.decay_fraction = 1.5;
  CHECK(error_of([&] { lr_at(c, 0); }) == "[schedule] decay_fraction 1.5 is outside [0, 1]");
  c.decay_fraction = 0.95;
  CHECK(error_of([&] { lr_at(c, 0); }) ==
        "[schedule] warmup_steps 100 plus 950 decay steps exceed total_steps 1000");
  c.decay_fraction = 0.1;
  c.min_lr_ratio = -0.5;
  CHECK(error_of([&] { validate(c); }) == "[schedule] min_lr_ratio -0.5 is outside [0, 1]");
  c.min_lr_ratio = 0;
  c.lr = 0;
  CHECK(error_of([&] { validate(c); }) == "[schedule] lr 0 must be positive");
  c.lr = 1e-3;
  CHECK(error_of([&] { lr_at(c, -1); }) == "[schedule] step -1 is negative");
  CHECK(error_of([&] { lr_at(ScheduleConfig{}, 0); }) == "[schedule] total_steps must be positive, got 0");
  CHECK(error_of([&] { parse_decay("step"); }) == "[schedule] unknown decay 'step' (linear, cosine)");
}

TEST_CASE("effective_warmup: a short run's warmup shrinks to what fits before the decay") {
  ScheduleConfig c;
  c.warmup_steps = 20;
  c.decay_fraction = 0.2;
  c.total_steps = 20;  // D = 4: 16 steps are left before the decay
  CHECK(effective_warmup(c) == 16);
  c.total_steps = 150;
  CHECK(effective_warmup(c) == 20);
  c.total_steps = 1;  // D = round(0.2) = 0
  CHECK(effective_warmup(c) == 1);
  c.decay_fraction = 1;
  CHECK(effective_warmup(c) == 0);
  c.warmup_steps = -3;  // never negative
  c.decay_fraction = 0;
  CHECK(effective_warmup(c) == 0);
}
