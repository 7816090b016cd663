// libFuzzer target: the ONNX importer on arbitrary bytes. Every malformed
// input must end in an InputError; a crash, a sanitizer report, an
// InternalError (it escapes and aborts) or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/onnx/onnx_importer.h"
#include "src/ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // No path: external data is refused, so the fuzzer never reads other files.
    auto m = tcc::import_onnx_bytes(bytes, "");
    tcc::verify(*m->graph);
  } catch (const tcc::InputError&) {
  }
  return 0;
}
