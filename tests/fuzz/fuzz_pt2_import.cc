// libFuzzer target: the .pt2 importer (torch.export.save archives) on
// arbitrary bytes. Every malformed archive must end in an InputError; a crash,
// a sanitizer report, an InternalError (it escapes and aborts) or a hang is a
// bug. The size caps are lowered so that a mutated size field cannot make the
// fuzzer allocate gigabytes before the importer refuses it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/pt2/pt2_importer.h"
#include "src/ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  tcc::Pt2Limits limits;
  limits.max_total_bytes = uint64_t{64} << 20;
  try {
    auto m = tcc::import_pt2_bytes(std::move(bytes), "fuzz.pt2", limits);
    tcc::verify(*m->graph);
  } catch (const tcc::InputError&) {
  }
  return 0;
}
