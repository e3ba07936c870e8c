#include "nn/params.hpp"

#include <algorithm>

#include "autograd/autograd.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

const Tensor& ParamView::operator[](std::string_view name) const {
  auto it = ps_->find(full(name));
  if (it == ps_->end()) fail("params", "missing parameter '", full(name), "'");
  return it->second;
}

Params init_params(const std::vector<ParamSpec>& specs, Generator& gen, DType dtype, double std) {
  Params ps;
  for (const ParamSpec& s : specs) {
    Tensor t;
    switch (s.init) {
      case Init::normal: t = randn(s.shape, gen, dtype) * std; break;
      case Init::ones: t = ones(s.shape, dtype); break;
      case Init::zeros: t = zeros(s.shape, dtype); break;
    }
    if (!ps.emplace(s.name, t).second) fail("params", "parameter '", s.name, "' is declared twice");
  }
  return ps;
}

int64_t count_params(const std::vector<ParamSpec>& specs) {
  int64_t n = 0;
  for (const ParamSpec& s : specs)
    if (__builtin_add_overflow(n, numel(s.shape), &n)) fail("params", "the parameter count overflows an int64");
  return n;
}

void check_params(const std::vector<ParamSpec>& specs, const Params& ps, std::string_view source) {
  for (const ParamSpec& s : specs) {
    auto it = ps.find(s.name);
    if (it == ps.end()) fail("params", source, ": missing tensor '", s.name, "'");
    if (it->second.shape() != s.shape)
      fail("params", source, ": tensor '", s.name, "' has shape ", to_string(it->second.shape()),
           " but the config needs ", to_string(s.shape));
  }
  if (ps.size() != specs.size())
    for (const auto& [name, t] : ps)
      if (std::none_of(specs.begin(), specs.end(), [&](const ParamSpec& s) { return s.name == name; }))
        fail("params", source, ": unexpected tensor '", name, "' for this config");
}

std::pair<Tensor, Params> value_and_grad(const std::function<Tensor(const Params&)>& f, const Params& ps) {
  std::vector<std::string> names;
  std::vector<Tensor> inputs;
  for (const auto& [name, t] : ps) {
    names.push_back(name);
    inputs.push_back(t);
  }
  auto [value, grads] = cotan::value_and_grad(
      [&](const std::vector<Tensor>& tracked) {
        Params view;
        for (size_t i = 0; i < names.size(); ++i) view.emplace(names[i], tracked[i]);
        return f(view);
      },
      inputs);
  Params out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace(names[i], grads[i]);
  return {value, out};
}

Params to(const Params& ps, Device device) {
  Params out;
  for (const auto& [name, t] : ps) out.emplace(name, cotan::to(t.detach(), device));
  return out;
}

State to(const State& st, Device device) {
  State out;
  out.training = st.training;
  out.buffers = to(st.buffers, device);
  return out;
}

Params cast(const Params& ps, DType dtype) {
  Params out;
  for (const auto& [name, t] : ps) out.emplace(name, is_floating(t.dtype()) ? cotan::cast(t, dtype) : t);
  return out;
}

Params adjoin(Params ps, const std::vector<std::vector<std::string>>& groups) {
  for (const std::vector<std::string>& names : groups) {
    if (names.size() < 2) continue;
    int64_t rows = 0;
    const Tensor* first = nullptr;
    for (const std::string& name : names) {
      auto it = ps.find(name);
      check(it != ps.end(), "adjoin", "missing parameter '", name, "'");
      const Tensor& t = it->second;
      if (!first) first = &t;
      check(t.dim() == 2 && t.size(1) == first->size(1) && t.dtype() == first->dtype() &&
                t.device() == first->device(),
            "adjoin", "'", name, "' (", to_string(t.shape()), ", ", t.dtype(), ", ", to_string(t.device()),
            ") does not stack under '", names[0], "' (", to_string(first->shape()), ", ", first->dtype(), ", ",
            to_string(first->device()), ")");
      rows += t.size(0);
    }
    const int64_t cols = first->size(1);
    const Tensor joint = Tensor::empty({rows, cols}, first->dtype(), first->device());
    Backend& kernels = backend(joint.device());
    int64_t at = 0;
    for (const std::string& name : names) {
      Tensor& t = ps.at(name);
      const Tensor place = joint.as_strided(t.shape(), {cols, 1}, at * cols);
      kernels.assign(place, t);
      at += t.size(0);
      t = place;
    }
  }
  return ps;
}

State cast(const State& st, DType dtype) {
  State out;
  out.training = st.training;
  out.buffers = cast(st.buffers, dtype);
  return out;
}

}  // namespace cotan::nn
