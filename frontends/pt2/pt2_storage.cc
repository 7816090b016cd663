#include "frontends/pt2/pt2_storage.h"

#include <cstring>

namespace tcc {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

Tensor StorageReader::view(const std::string& entry, const StorageView& v, const std::string& what,
                           bool empty_is_zeros) {
  const std::vector<int64_t>& shape = v.sizes;
  std::vector<int64_t> contiguous(shape.size(), 1);
  int64_t numel = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    contiguous[d] = numel;
    if (shape[d] < 0) a_.fail(entry, what + " has a negative size");
    if (shape[d] != 0 && numel > (int64_t{1} << 50) / shape[d]) a_.fail(entry, what + " has more elements than tcc can hold");
    numel *= shape[d];
  }
  std::vector<int64_t> strides = v.strides.empty() ? contiguous : v.strides;
  if (strides.size() != shape.size())
    a_.fail(entry, what + " has " + std::to_string(strides.size()) + " strides for rank " + std::to_string(shape.size()));
  if (v.offset < 0) a_.fail(entry, what + " has a negative storage offset");
  for (int64_t s : strides)
    if (s < 0) a_.fail(entry, what + " has a negative stride");

  size_t esize = dtype_size(v.dtype);
  uint64_t nbytes = a_.size(entry);
  if (nbytes == 0 && empty_is_zeros) return Tensor(v.dtype, shape);
  if (nbytes % esize != 0)
    a_.fail(entry, "holds " + std::to_string(nbytes) + " bytes, not a whole number of " +
                       std::string(dtype_name(v.dtype)) + " elements (for " + what + ")");
  int64_t storage = static_cast<int64_t>(nbytes / esize);
  // At most 50 dims have a size over 1 (numel <= 2^50), each adding under 2^113.
  __int128 last = v.offset;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) last += static_cast<__int128>(shape[d] - 1) * strides[d];
  if (numel > 0 && last >= storage)
    a_.fail(entry, "holds " + std::to_string(storage) + " elements, but " + what + " of shape " + shape_text(shape) +
                       " reads element " +
                       (last <= INT64_MAX ? std::to_string(static_cast<int64_t>(last)) : std::string("2^63 or later")));
  auto it = storages_.find(entry);
  if (it == storages_.end()) it = storages_.emplace(entry, a_.read(entry)).first;
  const std::string& bytes = it->second;
  if (v.offset == 0 && strides == contiguous && storage == numel) return Tensor::from_string_bytes(v.dtype, shape, bytes);
  Tensor t(v.dtype, shape);
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rem = i, src = v.offset;
    for (size_t d = shape.size(); d-- > 0;) {
      src += (rem % shape[d]) * strides[d];
      rem /= shape[d];
    }
    std::memcpy(t.raw_mut() + i * esize, bytes.data() + src * esize, esize);
  }
  return t;
}

}  // namespace tcc
