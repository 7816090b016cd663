// libFuzzer target: the restricted unpickler for torch.save'd dicts of
// tensors (frontends/pt2/torch_pickle) on arbitrary bytes as data.pkl. Bytes
// mutated inside a .pt2 archive fail the zip's checksums before the pickle is
// read, so this target puts them into a torch.save zip (beside storages
// data/0 to data/4 of 2048 down to 8 bytes) inside a .pt2 archive, then reads every
// tensor the pickle names. Every malformed pickle must end in an InputError; a
// crash, a sanitizer report (leaks included), an escaped InternalError or a
// hang is a bug.
#include <zip.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frontends/pt2/torch_pickle.h"
#include "src/diag/errors.h"

namespace {

// The entries as a zip, stored.
std::string zip_of(const std::vector<std::pair<std::string, std::string>>& entries) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = zip_open_from_source(out, ZIP_TRUNCATE, &err);
  zip_error_fini(&err);
  zip_source_keep(out);
  for (const auto& [name, data] : entries) {
    zip_source_t* s = zip_source_buffer(z, data.data(), data.size(), 0);
    zip_int64_t i = zip_file_add(z, name.c_str(), s, 0);
    zip_set_file_compression(z, i, ZIP_CM_STORE, 0);
  }
  zip_close(z);
  std::string bytes;
  zip_stat_t st;
  if (zip_source_stat(out, &st) == 0 && zip_source_open(out) == 0) {
    bytes.resize(st.size);
    zip_source_read(out, bytes.data(), st.size);
    zip_source_close(out);
  }
  zip_source_free(out);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string pickle(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> saved = {{"archive/data.pkl", pickle}};
  for (size_t k = 0; k < 5; ++k)
    saved.emplace_back("archive/data/" + std::to_string(k), std::string(2048 >> (2 * k), '\1'));
  tcc::Pt2Limits limits;
  limits.max_total_bytes = uint64_t{64} << 20;
  try {
    tcc::Pt2Archive archive(zip_of({{"m/data/weights/model.pt", zip_of(saved)}}), "fuzz.pt2", limits);
    tcc::TorchSavedDict dict(archive, "data/weights/model.pt", limits);
    for (const auto& [name, tensor] : tcc::unpickle_tensor_dict(dict.archive(), "data.pkl")) dict.tensor(name);
  } catch (const tcc::InputError&) {
  }
  return 0;
}
