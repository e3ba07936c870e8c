// The whole gradient-check table: the primitive ops' entries (autograd/gradcheck_table.hpp), the
// fused layers' (nn/fused.hpp) and the losses' (train/losses.hpp). Run by
// tests/autograd/test_gradcheck.cpp and `cotan gradcheck` (also against a device).
#pragma once

#include <vector>

#include "autograd/gradcheck_table.hpp"

namespace cotan::train {

const std::vector<OpCheck>& op_checks();

}  // namespace cotan::train
