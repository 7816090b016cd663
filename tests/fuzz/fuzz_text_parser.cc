// libFuzzer target: the textual IR parser on arbitrary bytes. Every malformed
// input must end in an InputError; a crash, a sanitizer report, an
// InternalError (it escapes and aborts) or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/ir/text.h"
#include "src/ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto m = tcc::parse_model(text, "<fuzz>");
    tcc::verify(*m->graph);
  } catch (const tcc::InputError&) {
  }
  return 0;
}
