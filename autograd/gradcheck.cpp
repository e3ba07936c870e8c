// Central-difference gradient checks (see gradcheck.hpp).
//
// L(x) = sum(f(x) * r) with r ~ N(0, 1) drawn once from options.seed. The analytic side is
// value_and_grad of L; the numeric side perturbs one element of a private contiguous f64 copy of
// each input at a time and evaluates f under NoGrad. Integer and bool inputs are handed to f
// unchanged and get no check (their InputCheck stays at zero errors, worst_element -1).
#include "autograd/gradcheck.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "tensor/ops.hpp"

namespace cotan {

namespace {

// sum_k y_k r_k in a fixed order, so both sides of a difference round the same way.
double project(const Tensor& y, const std::vector<double>& r) {
  std::vector<double> values = y.to_vector<double>();
  double acc = 0;
  for (size_t k = 0; k < values.size(); ++k) acc += values[k] * r[k];
  return acc;
}

void check_output(const Tensor& y) {
  check(y.defined(), "gradcheck", "f returned an undefined tensor");
  check(is_floating(y.dtype()), "gradcheck", "f returned a ", y.dtype(), " tensor; expected a floating tensor");
}

}  // namespace

GradcheckResult gradcheck(const Function& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  check(options.eps > 0, "gradcheck", "eps must be positive, got ", options.eps);

  // Private copies: perturbations never reach the caller's tensors.
  std::vector<Tensor> xs;
  std::vector<size_t> checked;  // positions of the floating inputs
  xs.reserve(inputs.size());
  {
    NoGrad no_grad;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      check(x.defined(), "gradcheck", "input ", i, " is undefined");
      if (is_floating(x.dtype())) {
        check(x.dtype() == DType::f64, "gradcheck", "input ", i, " has dtype ", x.dtype(),
              "; gradients are checked in f64 only (cast the input with cast(x, DType::f64))");
        check(x.device().is_cpu(), "gradcheck", "input ", i, " is on ", x.device(), "; gradcheck runs on the cpu");
        checked.push_back(i);
      }
      xs.push_back(is_floating(x.dtype()) ? clone(x.detach()) : x.detach());
    }
  }

  // The projection cotangent, in the output's shape.
  Tensor y0;
  {
    NoGrad no_grad;
    y0 = f(xs);
  }
  check_output(y0);
  Generator gen(options.seed);
  Tensor r = randn(y0.shape(), gen, DType::f64, y0.device());
  std::vector<double> r_host = r.to_vector<double>();
  Tensor r_like = y0.dtype() == DType::f64 ? r : cast(r, y0.dtype());

  // Analytic: gradients of L with respect to the floating inputs only; the others are closed over.
  Function loss = [&](const std::vector<Tensor>& floats) {
    std::vector<Tensor> all = xs;
    for (size_t j = 0; j < checked.size(); ++j) all[checked[j]] = floats[j];
    Tensor y = f(all);
    check_output(y);
    check(y.shape() == y0.shape(), "gradcheck", "f returned shape ", to_string(y.shape()), " on the second call, ",
          to_string(y0.shape()), " on the first");
    return sum(mul(y, r_like));
  };
  std::vector<Tensor> floats;
  for (size_t i : checked) floats.push_back(xs[i]);
  std::vector<std::vector<double>> analytic;
  {
    auto [value, grads] = value_and_grad(loss, floats);
    check(grads.size() == floats.size(), "gradcheck", "value_and_grad returned ", grads.size(), " gradients for ",
          floats.size(), " inputs");
    for (size_t j = 0; j < grads.size(); ++j) {
      check(grads[j].defined() && grads[j].shape() == floats[j].shape(), "gradcheck", "gradient of input ",
            checked[j], " has shape ", grads[j].defined() ? to_string(grads[j].shape()) : std::string("(undefined)"),
            ", expected ", to_string(floats[j].shape()));
      analytic.push_back(grads[j].to_vector<double>());
    }
  }

  // Numeric: central differences, one element at a time, written straight into the copies.
  auto evaluate = [&] {
    NoGrad no_grad;
    Tensor y = f(xs);
    check_output(y);
    check(y.shape() == y0.shape(), "gradcheck", "f returned shape ", to_string(y.shape()),
          " on a perturbed input, ", to_string(y0.shape()), " at the original one");
    return project(y, r_host);
  };

  GradcheckResult result;
  result.inputs.assign(inputs.size(), InputCheck{});
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < checked.size(); ++j) {
    InputCheck& out = result.inputs[checked[j]];
    double* p = xs[checked[j]].data<double>();
    double largest = 0;  // max_k |numeric_k|
    int64_t n = xs[checked[j]].numel();
    for (int64_t k = 0; k < n; ++k) {
      double saved = p[k];
      p[k] = saved + options.eps;
      double plus = evaluate();
      p[k] = saved - options.eps;
      double minus = evaluate();
      p[k] = saved;
      double numeric = (plus - minus) / (2 * options.eps);
      double a = analytic[j][size_t(k)];
      double err = std::abs(a - numeric);
      if (!std::isfinite(err)) err = inf;  // NaN counts as the worst possible error
      if (std::isfinite(numeric)) largest = std::max(largest, std::abs(numeric));
      if (out.worst_element < 0 || err > out.max_abs_err) {
        out.max_abs_err = err;
        out.worst_element = k;
        out.analytic = a;
        out.numeric = numeric;
      }
    }
    out.max_rel_err = out.max_abs_err / std::max(largest, options.floor);
    result.max_abs_err = std::max(result.max_abs_err, out.max_abs_err);
    result.max_rel_err = std::max(result.max_rel_err, out.max_rel_err);
    if (!(out.max_rel_err <= options.rtol)) result.pass = false;
  }
  return result;
}

namespace {

// Worst elementwise difference of `got` against `want`, normwise relative to max |want|.
InputCheck compare_values(const std::vector<double>& got, const std::vector<double>& want, double floor) {
  InputCheck out;
  double largest = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    double err = std::abs(got[k] - want[k]);
    if (!std::isfinite(err)) err = std::numeric_limits<double>::infinity();
    if (std::isfinite(want[k])) largest = std::max(largest, std::abs(want[k]));
    if (out.worst_element < 0 || err > out.max_abs_err) {
      out.max_abs_err = err;
      out.worst_element = int64_t(k);
      out.analytic = got[k];
      out.numeric = want[k];
    }
  }
  out.max_rel_err = out.max_abs_err / std::max(largest, floor);
  return out;
}

// f's output and the gradients of sum(f(x) * r) for the floating inputs, all read back to the host.
std::vector<std::vector<double>> value_and_projected_grads(const Function& f, const std::vector<Tensor>& xs,
                                                           const std::vector<size_t>& floating, uint64_t seed) {
  std::vector<Tensor> floats;
  for (size_t i : floating) floats.push_back(xs[i]);
  Tensor y;
  auto [value, grads] = value_and_grad(
      [&](const std::vector<Tensor>& fs) {
        std::vector<Tensor> all = xs;
        for (size_t j = 0; j < floating.size(); ++j) all[floating[j]] = fs[j];
        y = f(all);
        check_output(y);
        Generator gen(seed);
        Tensor r = to(randn(y.shape(), gen, DType::f64), y.device());
        return sum(mul(y, y.dtype() == DType::f64 ? r : cast(r, y.dtype())));
      },
      floats);
  std::vector<std::vector<double>> out;
  for (size_t j = 0; j < grads.size(); ++j) {
    check(grads[j].defined() && grads[j].shape() == floats[j].shape(), "gradcheck", "gradient of input ",
          floating[j], " is undefined or has the wrong shape");
    check(grads[j].device() == floats[j].device(), "gradcheck", "gradient of input ", floating[j], " is on ",
          grads[j].device(), ", the input on ", floats[j].device());
    out.push_back(grads[j].to_vector<double>());
  }
  out.push_back(y.detach().to_vector<double>());
  return out;
}

}  // namespace

GradcheckResult compare_devices(const Function& f, const std::vector<Tensor>& inputs, Device device,
                                const GradcheckOptions& options) {
  std::vector<Tensor> on_cpu, on_device;
  std::vector<size_t> floating;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    check(x.defined(), "gradcheck", "input ", i, " is undefined");
    check(x.device().is_cpu(), "gradcheck", "input ", i, " is on ", x.device(), "; pass the CPU inputs");
    if (is_floating(x.dtype())) floating.push_back(i);
    on_cpu.push_back(x.detach());
    on_device.push_back(to(x.detach(), device));
  }
  const auto want = value_and_projected_grads(f, on_cpu, floating, options.seed);
  const auto got = value_and_projected_grads(f, on_device, floating, options.seed);
  GradcheckResult result;
  result.inputs.assign(inputs.size() + 1, InputCheck{});
  for (size_t j = 0; j < want.size(); ++j) {
    check(got[j].size() == want[j].size(), "gradcheck", "the device returned ", got[j].size(), " values, the cpu ",
          want[j].size());
    InputCheck& out = result.inputs[j < floating.size() ? floating[j] : inputs.size()];
    out = compare_values(got[j], want[j], options.floor);
    result.max_abs_err = std::max(result.max_abs_err, out.max_abs_err);
    result.max_rel_err = std::max(result.max_rel_err, out.max_rel_err);
    if (!(out.max_rel_err <= options.rtol)) result.pass = false;
  }
  return result;
}

std::string GradcheckResult::describe() const {
  std::ostringstream out;
  out.precision(3);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputCheck& c = inputs[i];
    if (i) out << "; ";
    out << "input " << i << ": ";
    if (c.worst_element < 0) {
      out << "not checked";
      continue;
    }
    out << "max rel " << c.max_rel_err << " at element " << c.worst_element;
    out.precision(10);
    out << " (analytic " << c.analytic << ", numeric " << c.numeric << ")";
    out.precision(3);
  }
  return out.str();
}

}  // namespace cotan
