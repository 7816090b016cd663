#include "src/ir/type.h"

namespace tcc {

Dim dims_product(const Dims& dims) {
  SymExpr p = SymExpr::constant(1);
  for (const auto& d : dims) {
    if (d.is_unknown()) return Dim::unknown();
    p = p * d.expr();
  }
  return Dim(p);
}

std::string dims_str(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

Type Type::tensor(DType dtype, Dims shape) {
  Type t;
  t.kind_ = Kind::Tensor;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Type Type::tensor_unranked(DType dtype) {
  Type t;
  t.kind_ = Kind::Tensor;
  t.dtype_ = dtype;
  return t;
}

Type Type::sequence(Type elem) {
  Type t;
  t.kind_ = Kind::Sequence;
  t.elem_ = std::make_shared<const Type>(std::move(elem));
  return t;
}

Type Type::optional(Type elem) {
  Type t;
  t.kind_ = Kind::Optional;
  t.elem_ = std::make_shared<const Type>(std::move(elem));
  return t;
}

bool Type::fully_shaped() const {
  if (!is_tensor() || !shape_) return false;
  for (const auto& d : *shape_)
    if (d.is_unknown()) return false;
  return true;
}

bool Type::fully_static() const {
  if (!is_tensor() || !shape_) return false;
  for (const auto& d : *shape_)
    if (!d.is_static()) return false;
  return true;
}

std::string Type::str() const {
  switch (kind_) {
    case Kind::Unknown:
      return "?";
    case Kind::Sequence:
      return "seq<" + elem_->str() + ">";
    case Kind::Optional:
      return "opt<" + elem_->str() + ">";
    case Kind::Tensor:
      break;
  }
  std::string s(dtype_name(dtype_));
  if (!shape_) return s + "[*]";
  s += "[";
  for (size_t i = 0; i < shape_->size(); ++i) s += (i ? ", " : "") + (*shape_)[i].str();
  return s + "]";
}

bool Type::operator==(const Type& o) const {
  if (kind_ != o.kind_ || dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (elem_ || o.elem_) return elem_ && o.elem_ && *elem_ == *o.elem_;
  return true;
}

}  // namespace tcc
