// Params and State, Lux-style: a layer is a plain description built from a config; its
// parameters live outside it in Params (a flat map from dotted HF names to tensors) and its
// buffers in State. apply(x, ps, st) returns the output and the new State; nothing is updated
// in place, so a frozen teacher stays frozen by construction and a recomputed forward pass
// (checkpoint) cannot update a buffer twice: its State is simply dropped.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/random.hpp"
#include "tensor/tensor.hpp"

namespace cotan::nn {

using Params = std::map<std::string, Tensor>;

struct State {
  std::map<std::string, Tensor> buffers;  // e.g. "model.layers.3.self_attn.alpha_ma"
  bool training = false;                  // training passes update buffers; evaluation freezes them
};

enum class Init { normal, ones, zeros };

// One parameter a layer declares: its full name, shape, how it starts, and whether weight decay
// applies to it (not to norms, biases or sink logits).
struct ParamSpec {
  std::string name;
  Shape shape;
  Init init = Init::normal;
  bool decay = true;
};

// Read access to the parameters under a prefix: view.sub("q_proj")["weight"] reads
// "<prefix>.q_proj.weight". A missing name throws "[params] missing parameter '<full name>'".
class ParamView {
 public:
  explicit ParamView(const Params& ps, std::string prefix = "") : ps_(&ps), prefix_(std::move(prefix)) {}
  const Tensor& operator[](std::string_view name) const;
  bool contains(std::string_view name) const { return ps_->count(full(name)) > 0; }
  ParamView sub(std::string_view name) const { return ParamView(*ps_, full(name)); }
  std::string full(std::string_view name) const {
    return prefix_.empty() ? std::string(name) : prefix_ + "." + std::string(name);
  }

 private:
  const Params* ps_;
  std::string prefix_;
};

inline std::string join(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : std::string(prefix) + "." + std::string(name);
}

// Creates the declared parameters in declaration order: normal(0, std) draws from `gen`.
Params init_params(const std::vector<ParamSpec>& specs, Generator& gen, DType dtype, double std);
int64_t count_params(const std::vector<ParamSpec>& specs);

// Checks that `ps` has exactly the declared names and shapes; errors name the tensor and `source`.
void check_params(const std::vector<ParamSpec>& specs, const Params& ps, std::string_view source);

// Copies of every tensor on `device` (off the tape; tensors already there are shared, not copied).
Params to(const Params& ps, Device device);
State to(const State& st, Device device);
// Every floating tensor cast to `dtype` (differentiable: gradients flow back to the originals).
Params cast(const Params& ps, DType dtype);
State cast(const State& st, DType dtype);

// ps with each group's tensors (2-D, one column count, dtype and device) laid out as adjacent row
// blocks of one buffer, in the group's order, so that concatenating them along rows is a view of
// that buffer, not a copy (joint_linear's stacked weights: CausalLM::joint_weight_groups). Meant
// for frozen parameters (a distillation teacher): the optimizer updates each parameter on its own.
// Errors name the group's tensors.
Params adjoin(Params ps, const std::vector<std::vector<std::string>>& groups);

// Tracks every parameter and returns f's value and its gradient per parameter (same names).
std::pair<Tensor, Params> value_and_grad(const std::function<Tensor(const Params&)>& f, const Params& ps);

// value_and_grad for an f that returns (value, aux), a pair or tuple: the objective's loss with
// its new State and loss parts, returned without a variable captured to carry them out. Returns
// (value, aux, gradients); aux is as f computed it (cotan::value_and_grad_aux, autograd.hpp).
//   auto [loss, st2, grads] = nn::value_and_grad_aux([&](const nn::Params& p) {
//     auto [logits, next] = model.apply(ids, p, st);
//     return std::pair{train::cross_entropy(std::move(logits), targets), next};
//   }, ps);
template <class F>
  requires std::is_invocable_v<F&, const Params&>
auto value_and_grad_aux(F&& f, const Params& ps) {
  using Result = std::invoke_result_t<F&, const Params&>;
  static_assert(std::tuple_size_v<Result> == 2, "f must return a pair (value, aux)");
  using Aux = std::remove_cvref_t<std::tuple_element_t<1, Result>>;
  std::optional<Aux> aux;  // set by the one call of f
  auto [value, grads] = value_and_grad(
      [&](const Params& p) {
        Result result = f(p);
        aux.emplace(std::get<1>(std::move(result)));
        return Tensor(std::get<0>(std::move(result)));
      },
      ps);
  return std::tuple<Tensor, Aux, Params>(std::move(value), std::move(*aux), std::move(grads));
}

}  // namespace cotan::nn
