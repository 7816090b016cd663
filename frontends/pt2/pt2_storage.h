// Tensors viewed from the raw storages of a .pt2 archive (or of a torch.save
// zip inside one): an entry of little-endian elements, read once however many
// tensors view it (tied weights share a storage), and a view of it (sizes,
// strides and offset in elements) copied out as a contiguous tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frontends/pt2/pt2_archive.h"
#include "src/ir/tensor.h"

namespace tcc {

// Where a tensor lies in its storage, in elements; empty strides: contiguous.
struct StorageView {
  DType dtype = DType::Undefined;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

class StorageReader {
 public:
  explicit StorageReader(const Pt2Archive& a) : a_(a) {}

  // The tensor `v` views in `entry`; `what` names it in diagnostics ("tensor
  // 'fc1.weight'"). The entry must hold whole elements and every element the
  // view reads, else an InputError naming the entry; where `empty_is_zeros`,
  // an entry of no bytes reads as zeros (torch 2.9 and later save fake or
  // empty tensors without bytes).
  Tensor view(const std::string& entry, const StorageView& v, const std::string& what, bool empty_is_zeros);

  const Pt2Archive& archive() const { return a_; }

 private:
  const Pt2Archive& a_;
  std::map<std::string, std::string> storages_;
};

}  // namespace tcc
