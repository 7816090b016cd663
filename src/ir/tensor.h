// A dense host tensor: dtype, static shape and row-major bytes.
//
// Used for initializers, constant attributes, constant folding and the
// reference interpreter. Storage is shared on copy (copy-on-write is not needed:
// code that writes makes a fresh tensor), so passing tensors by value is cheap.
// The storage may be a buffer another reader filled (a protobuf's raw_data
// string): a large initializer is then never copied on its way into the IR.
//
// A Tensor also carries ONNX's sequence and optional values through the
// reference interpreter (Type's seq<...> and opt<...>): their elements are
// Tensors, and they have no shape or storage of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/ir/dtype.h"

namespace tcc {

class Tensor {
 public:
  enum class Kind { Tensor, Sequence, Optional };

  Tensor() = default;
  // Zero-filled tensor (empty strings for String).
  Tensor(DType dtype, std::vector<int64_t> shape);

  // Builders for small constants.
  static Tensor scalar_f32(float v);
  static Tensor scalar_i64(int64_t v);
  static Tensor from_i64(const std::vector<int64_t>& v, std::vector<int64_t> shape = {});
  static Tensor from_f32(const std::vector<float>& v, std::vector<int64_t> shape = {});
  // Wraps existing bytes; their size must be numel * dtype_size.
  static Tensor from_bytes(DType dtype, std::vector<int64_t> shape, std::vector<std::byte> bytes);
  // Takes over a string's bytes (same size rule) without copying them.
  static Tensor from_string_bytes(DType dtype, std::vector<int64_t> shape, std::string bytes);
  // A dtype and shape with no storage (raw() is null, nbytes() 0): what an op
  // that reads only its input's shape (Shape, Size) is given where the data
  // lives elsewhere, on a device, or is not computed yet.
  static Tensor shape_only(DType dtype, std::vector<int64_t> shape);
  // A sequence of tensors of dtype `elem` (elements of another dtype are an
  // internal error).
  static Tensor sequence(DType elem, std::vector<Tensor> elements);
  // An optional: none (no element) or one tensor or sequence whose tensors are of dtype `elem`.
  static Tensor optional(DType elem, std::vector<Tensor> element);

  Kind kind() const { return kind_; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_optional() const { return kind_ == Kind::Optional; }
  // A sequence's elements; an optional's element, or none.
  const std::vector<Tensor>& elements() const;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  bool defined() const { return dtype_ != DType::Undefined; }

  const std::byte* raw() const { return bytes_.get(); }
  std::byte* raw_mut() { return bytes_.get(); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes_.get()); }
  template <typename T>
  T* data_mut() { return reinterpret_cast<T*>(bytes_.get()); }
  const std::vector<std::string>& strings() const { return *strings_; }
  std::vector<std::string>& strings_mut() { return *strings_; }

  // Element i (flat index) converted to double / int64, whatever the dtype.
  // Bool reads as 0 or 1. Not for String.
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  // Stores v converted to the tensor's dtype (rounding to nearest for f16/bf16
  // and, saturating, the 8-bit floats and f4e2m1; truncation toward zero for
  // integers, saturating except for i4 and u4, which keep the low four bits as
  // set_i64 does; v != 0 for bool).
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);

  // All elements as int64 (for shape-like tensors).
  std::vector<int64_t> to_i64_vector() const;
  // A copy with a new shape of the same element count.
  Tensor reshaped(std::vector<int64_t> shape) const;
  // A copy converted to another dtype.
  Tensor cast(DType to) const;
  // Deep copy (fresh storage).
  Tensor clone() const;

  // Exact equality of kind, dtype, shape and bytes (elements, for sequences and optionals).
  bool identical(const Tensor& o) const;

 private:
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  // Points into a shared owner (a vector or a string) through shared_ptr's
  // aliasing constructor, so any container's bytes can back a tensor.
  template <typename Owner>
  void own(std::shared_ptr<Owner> owner);
  // A tensor whose storage is `bytes` (a vector or a string of numel * dtype_size bytes).
  template <typename Owner>
  static Tensor adopt(DType dtype, std::vector<int64_t> shape, Owner bytes);

  std::shared_ptr<std::byte> bytes_;
  size_t nbytes_ = 0;
  std::shared_ptr<std::vector<std::string>> strings_;
  Kind kind_ = Kind::Tensor;
  std::shared_ptr<const std::vector<Tensor>> elements_;  // sequences and optionals
};

// Element count of a shape, or -1 if it overflows int64 or has a negative dim.
int64_t checked_numel(const std::vector<int64_t>& shape);
// Row-major strides (in elements) of a shape.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);  // "[2, 3]"
// Every multi-index of a shape of non-negative dims, in row-major order (a
// sliding window's taps, an output's positions).
std::vector<std::vector<int64_t>> all_indices(const std::vector<int64_t>& shape);

}  // namespace tcc
