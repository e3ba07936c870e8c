// The table of gradient checks: one entry per differentiable op (or op variant), each drawing
// fresh f64 inputs from a Generator seeded by (seed, name) and running gradcheck on them. Inputs
// are built away from kinks (relu and abs near 0, clamp near its bounds, ties in maximum and max)
// so that central differences are exact to O(eps^2). Shared by tests/autograd/test_gradcheck.cpp
// and `cotan gradcheck`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.hpp"

namespace cotan {

struct OpCheck {
  std::string name;
  std::function<GradcheckResult(uint64_t seed)> run;  // central differences on the CPU
  // The same inputs on `device` against the CPU (compare_devices): output and gradients.
  std::function<GradcheckResult(uint64_t seed, Device device)> compare;
};

// The tolerance of OpCheck::compare: f64 on both sides, so only the order of roundings differs.
inline constexpr double kDeviceCompareRtol = 1e-9;

const std::vector<OpCheck>& op_checks();

}  // namespace cotan
