// torch.save's file for a dict of tensors, as torch.export.save stores a
// program's weights and constants before torch 2.9: a zip whose one folder
// holds data.pkl (a protocol-2 pickle of the dict) and data/<key> (each
// storage's raw little-endian elements). torch 2.8 writes it as
// data/weights/<model>.pt of the archive, 2.7 and earlier as
// serialized_state_dict.pt and serialized_constants.pt.
//
// The pickle is read by a restricted machine that knows only what torch.save
// writes for such a dict: the opcodes of protocol 2 it uses, the globals
// collections.OrderedDict, torch._utils._rebuild_tensor_v2,
// torch._utils._rebuild_parameter and torch.<Dtype>Storage, and storages as
// persistent ids ('storage', <Dtype>Storage, key, location, numel). Anything
// else (another global or opcode, a memo slot or stack value that is not
// there, a truncated pickle, a key that is not a plain name, a value that is
// not a tensor, a storage smaller than a tensor's extent) is an InputError
// naming the archive, the entry and what was expected; nothing is executed.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontends/pt2/pt2_archive.h"
#include "frontends/pt2/pt2_storage.h"

namespace tcc {

// One tensor of the dict: a view of the storage data/<storage>.
struct PickledTensor {
  std::string storage;
  int64_t storage_numel = 0;  // elements the pickle says the storage holds
  StorageView view;
};

// The dict pickled in `entry` of `a` ("data.pkl"), by key.
std::map<std::string, PickledTensor> unpickle_tensor_dict(const Pt2Archive& a, const std::string& entry);

// A torch.save zip held in `entry` of `outer`, opened from memory; it is
// named "<outer file>/<entry>" in diagnostics.
class TorchSavedDict {
 public:
  TorchSavedDict(const Pt2Archive& outer, const std::string& entry, Pt2Limits limits);

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor saved under `name` (which has() must know), contiguous.
  Tensor tensor(const std::string& name);
  const Pt2Archive& archive() const { return *archive_; }

 private:
  std::unique_ptr<Pt2Archive> archive_;
  std::unique_ptr<StorageReader> storages_;
  std::map<std::string, PickledTensor> tensors_;
};

}  // namespace tcc
