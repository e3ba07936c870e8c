// A planted include that runs sideways (eval/ may not include train/: evaluation scores any model,
// trained by anything): tests/layering/check.sh must name it (layering_catches_upward_includes).
#pragma once

#include "nn/language_model.hpp"
#include "train/trainer.hpp"
