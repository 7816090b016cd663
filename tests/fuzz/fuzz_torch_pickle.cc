// libFuzzer target: the restricted unpickler for torch.save'd dicts of
// tensors (frontends/pt2/torch_pickle) on arbitrary bytes as data.pkl. Bytes
// mutated inside a .pt2 archive fail the zip's checksums before the pickle is
// read, so this target puts them into a torch.save zip (beside storages
// data/0 to data/4 of 2048 down to 8 bytes) inside a .pt2 archive, then reads every
// tensor the pickle names. Every malformed pickle must end in an InputError; a
// crash, a sanitizer report (leaks included), an escaped InternalError or a
// hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/pt2/torch_pickle.h"
#include "src/diag/errors.h"
#include "tests/unit/support/zip_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string pickle(reinterpret_cast<const char*>(data), size);
  tcc::ZipEntries saved = {{"archive/data.pkl", pickle}};
  for (size_t k = 0; k < 5; ++k)
    saved.emplace_back("archive/data/" + std::to_string(k), std::string(2048 >> (2 * k), '\1'));
  tcc::Pt2Limits limits;
  limits.max_total_bytes = uint64_t{64} << 20;
  try {
    tcc::Pt2Archive archive(tcc::write_zip({{"m/data/weights/model.pt", tcc::write_zip(saved)}}), "fuzz.pt2", limits);
    tcc::TorchSavedDict dict(archive, "data/weights/model.pt", limits);
    for (const auto& [name, tensor] : tcc::unpickle_tensor_dict(dict.archive(), "data.pkl")) dict.tensor(name);
  } catch (const tcc::InputError&) {
  }
  return 0;
}
