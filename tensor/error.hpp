// cotan::Error, cat, fail and check live on the ground floor (util/error.hpp), below tensor/.
#pragma once

#include "util/error.hpp"
