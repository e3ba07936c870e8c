#include "app/commands.hpp"
