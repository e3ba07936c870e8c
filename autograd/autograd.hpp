// Reverse-mode automatic differentiation, define-by-run.
//
// Each op that runs with a tracked input (and grad mode on) records a Node: the op's name, the
// nodes of its inputs and its pullback, which maps the cotangent of the output to one cotangent
// per input (an undefined Tensor means "no gradient", for indices, or zero). Pullbacks are
// written with ordinary ops and run in no_grad mode. The engine visits nodes in reverse creation
// order (a valid topological order: inputs are always created first) and sums cotangents where a
// value fans out, so gradients are deterministic.
//
// A slice's node also says where it lies in its input (`region`). The engine then writes the
// slice's cotangent into that place of the input's cotangent instead of running the pullback,
// which would pad it with zeros to the input's shape: a value cut into parts (the columns of a
// joint q/k/v projection) gets one cotangent, assembled part by part, and no zero-padded copy of
// it per part.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"

namespace cotan {

using Pullback = std::function<std::vector<Tensor>(const Tensor& cotangent)>;

// Where a slice lies in its input: along `axis`, elements start, start + step, ... < stop.
struct SliceRegion {
  int64_t axis = 0, start = 0, stop = 0, step = 1;
};

struct Node {
  const char* op = "leaf";
  std::vector<std::shared_ptr<Node>> inputs;  // null where that input is not tracked
  Pullback pullback;                          // empty for leaves
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  uint64_t sequence = 0;  // creation order
  std::optional<SliceRegion> region;  // set by slice: its one input's cotangent takes it in place
};

// Whether ops record onto the tape (per thread; on by default).
bool grad_enabled();

// Turns recording off for its lifetime: for inference, teachers and optimizer updates.
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};

// True while checkpoint() re-runs a forward pass inside the backward pass.
bool recomputing();

// run_concurrently (tensor/ops.hpp) for two computations that do not depend on each other: a
// student's forward pass (a) beside its frozen teacher's (b), a pullback's two products. a runs
// with the caller's grad mode, b records nothing (NoGrad), so the tape holds a's nodes alone, in
// a's order, and the gradients are summed as if b had not run; b sees the caller's recomputing().
// Inside a checkpointed function (its first run or its recomputation) the two run one after the
// other on the calling thread, where the checkpoint's kept values are.
void concurrently(Device device, const std::function<void()>& a, const std::function<void()>& b);

// A value a checkpointed forward pass must see unchanged when it is recomputed (a running
// average, a random draw): the first run of a function under checkpoint() calls compute() and
// keeps the result; the recomputation returns the kept tensors in the order they were kept,
// without calling compute(), whatever the captured state says by then. Outside checkpoint() it
// is compute(). The result is a constant: detached, no gradient flows into it. A recomputation
// that asks for more values than its first run kept throws "[checkpoint] ...".
Tensor same_on_recompute(const std::function<Tensor()>& compute);

// Records `y` as the output of `op` applied to `inputs` when grad mode is on and any input is
// tracked, and returns a new handle of y's data that carries the node (y itself when nothing is
// recorded). The pullback may capture y: its copy never carries the node, so it cannot form a
// reference cycle. The pullback must return inputs.size() cotangents.
Tensor record(const char* op, Tensor y, std::initializer_list<Tensor> inputs, Pullback pullback);
Tensor record(const char* op, Tensor y, const std::vector<Tensor>& inputs, Pullback pullback);

// A tracked leaf sharing x's data: gradients can be taken with respect to it.
Tensor track(const Tensor& x);

// Cotangents of `wrt` (tracked tensors) given `output` and its cotangent. Tensors that `output`
// does not depend on get zeros.
std::vector<Tensor> gradients(const Tensor& output, const Tensor& cotangent, const std::vector<Tensor>& wrt);

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs f on tracked copies of `inputs`; f must return a single-element floating tensor.
// Returns f's value (detached) and one gradient per input, with the input's shape and dtype.
std::pair<Tensor, std::vector<Tensor>> value_and_grad(const Function& f, const std::vector<Tensor>& inputs);

// value_and_grad for an f that returns its value together with an auxiliary result, as a pair
// or tuple (value, aux): the model's new State, the parts of a loss (JAX's has_aux). Returns
// (value, aux, gradients): the value and gradients as value_and_grad returns them, aux as f
// computed it, not detached (Aux is any movable type; only the value is differentiated). A
// tracked tensor in aux keeps its part of the tape, and the values that part saved, alive for as
// long as it is held: detach what outlives the step.
//   auto [loss, x_mean, grads] = value_and_grad_aux([](const std::vector<Tensor>& in) {
//     return std::pair{sum(square(in[0])), mean(in[0]).detach()};
//   }, {x});
template <class F>
  requires std::is_invocable_v<F&, const std::vector<Tensor>&>
auto value_and_grad_aux(F&& f, const std::vector<Tensor>& inputs) {
  using Result = std::invoke_result_t<F&, const std::vector<Tensor>&>;
  static_assert(std::tuple_size_v<Result> == 2, "f must return a pair (value, aux)");
  using Aux = std::remove_cvref_t<std::tuple_element_t<1, Result>>;
  std::optional<Aux> aux;  // set by the one call of f
  auto [value, grads] = value_and_grad(
      [&](const std::vector<Tensor>& in) {
        Result result = f(in);
        aux.emplace(std::get<1>(std::move(result)));
        return Tensor(std::get<0>(std::move(result)));
      },
      inputs);
  return std::tuple<Tensor, Aux, std::vector<Tensor>>(std::move(value), std::move(*aux), std::move(grads));
}

// The vector-Jacobian product of f at `inputs` with `cotangent` (f's output shape).
std::pair<Tensor, std::vector<Tensor>> vjp(const Function& f, const std::vector<Tensor>& inputs,
                                           const Tensor& cotangent);

// Runs f without keeping its intermediate values; the backward pass runs f again (with
// recomputing() true) to get them. Memory for time, results identical.
Tensor checkpoint(const Function& f, const std::vector<Tensor>& inputs);

}  // namespace cotan
