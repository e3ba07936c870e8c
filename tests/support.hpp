// Small helpers the test suites share.
#pragma once

#include <string>

#include "util/error.hpp"

// The message of the cotan::Error that f throws, or "(no error)" when it throws none; for tests
// that compare a message as a whole or look into it.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const cotan::Error& e) {
    return e.what();
  }
  return "(no error)";
}
