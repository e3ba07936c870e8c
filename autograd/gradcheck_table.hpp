// The table of gradient checks of the primitive ops: one entry per differentiable op (or op
// variant), each drawing fresh f64 inputs from a Generator seeded by (seed, name) and running
// gradcheck on them. Inputs are built away from kinks (relu and abs near 0, clamp near its bounds,
// ties in maximum and max) so that central differences are exact to O(eps^2). The layers above add
// their fused ops' entries with make_op_check (train/gradcheck_cases.hpp has the whole table, which
// tests/autograd/test_gradcheck.cpp and `cotan gradcheck` run).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "tensor/random.hpp"

namespace cotan {

struct OpCheck {
  std::string name;
  std::function<GradcheckResult(uint64_t seed)> run;  // central differences on the CPU
  // The same inputs on `device` against the CPU (compare_devices): output and gradients.
  std::function<GradcheckResult(uint64_t seed, Device device)> compare;
};

// The tolerance of OpCheck::compare: f64 on both sides, so only the order of roundings differs.
inline constexpr double kDeviceCompareRtol = 1e-9;

// One entry's function and inputs, drawn from its Generator.
struct GradcheckCase {
  Function f;
  std::vector<Tensor> inputs;
};

// The check named `name`: make draws its inputs from a Generator seeded by (seed, name).
OpCheck make_op_check(std::string name, std::function<GradcheckCase(Generator&)> make);

// The entries of the primitive ops (tensor/ops.hpp).
const std::vector<OpCheck>& primitive_op_checks();

// Input makers shared by the entries, f64.
namespace gradcheck_inputs {
Tensor normal(const Shape& shape, Generator& gen);
// Uniform in [0.5, 1.5): safe for log, sqrt, rsqrt, reciprocal and fractional powers.
Tensor positive(const Shape& shape, Generator& gen);
}  // namespace gradcheck_inputs

}  // namespace cotan
