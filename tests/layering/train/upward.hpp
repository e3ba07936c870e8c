// A planted include that runs upward (train/ may not include study/, which runs above it):
// tests/layering/check.sh must name it (the meson test layering_catches_upward_includes).
#pragma once

#include "study/study.hpp"
#include "train/trainer.hpp"
