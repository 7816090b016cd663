// The message bad input gets, for tests that check it.
#pragma once

#include <string>

#include "src/diag/errors.h"

namespace tcc {

// The message of the InputError that `run` throws, or "(no error)" where it
// throws none (which no message a test looks for contains, so the test fails).
template <typename F>
std::string input_error(F&& run) {
  try {
    run();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tcc
