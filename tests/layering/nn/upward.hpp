// A planted include that runs upward (nn/ may not include train/): tests/layering/check.sh must
// refuse this folder (the meson test layering_catches_upward_includes).
#pragma once

#include "tensor/tensor.hpp"
#include "train/losses.hpp"
