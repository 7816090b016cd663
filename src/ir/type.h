// Dimensions and value types.
//
// A Dim is static (a constant SymExpr), symbolic (any other SymExpr) or
// unknown. A Type is a tensor type (dtype + shape, where the shape itself may be
// of unknown rank), a sequence or optional of a tensor type, or unknown.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/ir/dtype.h"
#include "src/ir/sym.h"

namespace tcc {

class Dim {
 public:
  Dim() = default;  // unknown
  Dim(int64_t v) : e_(SymExpr::constant(v)) {}  // NOLINT: a size is a dim
  explicit Dim(SymExpr e) : e_(std::move(e)) {}
  static Dim unknown() { return Dim(); }
  static Dim symbol(const std::string& name) { return Dim(SymExpr::symbol(name)); }

  bool is_unknown() const { return !e_.has_value(); }
  bool is_static() const { return e_ && e_->is_constant(); }
  bool is_symbolic() const { return e_ && !e_->is_constant(); }
  int64_t value() const { return e_->constant_value(); }  // only when is_static()
  const SymExpr& expr() const { return *e_; }            // only when !is_unknown()

  // "768", "batch*seq", "?".
  std::string str() const { return e_ ? e_->str() : "?"; }
  bool operator==(const Dim& o) const { return e_ == o.e_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }

 private:
  std::optional<SymExpr> e_;
};

using Dims = std::vector<Dim>;

// Product of dims (a symbolic element count); unknown if any dim is unknown.
Dim dims_product(const Dims& dims);
std::string dims_str(const Dims& dims);  // "[batch, seq, 768]"

class Type {
 public:
  enum class Kind { Unknown, Tensor, Sequence, Optional };

  Type() = default;  // unknown
  static Type tensor(DType dtype, Dims shape);
  static Type tensor_unranked(DType dtype);
  static Type sequence(Type elem);
  static Type optional(Type elem);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_unknown() const { return kind_ == Kind::Unknown; }
  DType dtype() const { return dtype_; }
  bool has_rank() const { return shape_.has_value(); }
  size_t rank() const { return shape_->size(); }     // only when has_rank()
  const Dims& shape() const { return *shape_; }       // only when has_rank()
  Dims& mutable_shape() { return *shape_; }
  const Type& elem() const { return *elem_; }         // sequences and optionals
  // Every dim known (static or symbolic).
  bool fully_shaped() const;
  // Every dim static.
  bool fully_static() const;

  // Text form: "f32[batch, 768]", "f32[*]" (unknown rank), "seq<f32[?]>", "?".
  std::string str() const;
  bool operator==(const Type& o) const;
  bool operator!=(const Type& o) const { return !(*this == o); }

 private:
  Kind kind_ = Kind::Unknown;
  DType dtype_ = DType::Undefined;
  std::optional<Dims> shape_;
  std::shared_ptr<const Type> elem_;
};

}  // namespace tcc
