// Numerical gradient checks by central differences in f64.
//
// f may return any shape: it is projected onto a fixed random cotangent r (seeded), so
// L(x) = sum(f(x) * r) and every output element takes part. For each input element,
//   numeric = (L(x + eps e_k) - L(x - eps e_k)) / (2 eps)
// is compared with the analytic gradient of L from the autograd engine.
// Per input: max_abs_err = max_k |analytic_k - numeric_k|, and
//            max_rel_err = max_abs_err / max(max_k |numeric_k|, floor)   (normwise: relative to the
//            largest gradient entry of that input, so near-zero entries do not blow it up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"

namespace cotan {

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-6;  // pass when max_rel_err <= rtol for every input
  double floor = 1e-12;
  uint64_t seed = 0;   // for the projection cotangent
};

struct InputCheck {
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t worst_element = -1;  // flat index where |analytic - numeric| is largest
  double analytic = 0;         // the two values at that element
  double numeric = 0;
};

struct GradcheckResult {
  bool pass = true;
  std::vector<InputCheck> inputs;  // one per input (non-floating inputs: skipped, zero errors)
  double max_abs_err = 0;
  double max_rel_err = 0;
  std::string describe() const;    // "input 1: max rel 3e-9 at element 17 (analytic 0.5, numeric 0.5)"
};

// Inputs must be f64 (floating inputs of other dtypes are refused with a clear error); integer
// inputs (indices) are passed through unchanged and not checked.
GradcheckResult gradcheck(const Function& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// The same function run on `device` against the CPU, on the same f64 inputs (copied there): the
// output and the gradient of L = sum(f(x) * r) for every floating input. Per input, `analytic`
// holds the device's value and `numeric` the CPU's at the worst element; the output counts as one
// more entry of `inputs` (the last). Errors are normwise as above; passes when every max_rel_err
// <= options.rtol (rounding differences of other reduction orders are ~1e-15 in f64).
GradcheckResult compare_devices(const Function& f, const std::vector<Tensor>& inputs, Device device,
                                const GradcheckOptions& options = {});

}  // namespace cotan
