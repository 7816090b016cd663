#include "src/ir/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "src/diag/errors.h"

namespace tcc {

int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <typename Owner>
void Tensor::own(std::shared_ptr<Owner> owner) {
  nbytes_ = owner->size();
  auto* data = reinterpret_cast<std::byte*>(owner->data());
  bytes_ = std::shared_ptr<std::byte>(std::move(owner), data);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = checked_numel(shape_);
  TCC_CHECK(numel_ >= 0) << "invalid tensor shape " << shape_str(shape_);
  if (dtype_ == DType::String) {
    strings_ = std::make_shared<std::vector<std::string>>(numel_);
    own(std::make_shared<std::vector<std::byte>>());
  } else {
    // calloc hands large sizes fresh zero pages from the kernel: a big zero
    // tensor (an optimizer's initial state) costs nothing until written.
    if (static_cast<uint64_t>(numel_) > std::numeric_limits<size_t>::max() / dtype_size(dtype_))
      throw std::bad_alloc();
    nbytes_ = static_cast<size_t>(numel_) * dtype_size(dtype_);
    auto* zeros = static_cast<std::byte*>(std::calloc(std::max<size_t>(nbytes_, 1), 1));
    if (!zeros) throw std::bad_alloc();
    bytes_ = std::shared_ptr<std::byte>(zeros, std::free);
  }
}

Tensor Tensor::scalar_f32(float v) { return from_f32({v}); }
Tensor Tensor::scalar_i64(int64_t v) { return from_i64({v}); }

Tensor Tensor::from_i64(const std::vector<int64_t>& v, std::vector<int64_t> shape) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<int64_t>(v.size())};
  Tensor t(DType::I64, std::move(shape));
  TCC_CHECK(t.numel() == static_cast<int64_t>(v.size()));
  std::memcpy(t.raw_mut(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

Tensor Tensor::from_f32(const std::vector<float>& v, std::vector<int64_t> shape) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<int64_t>(v.size())};
  Tensor t(DType::F32, std::move(shape));
  TCC_CHECK(t.numel() == static_cast<int64_t>(v.size()));
  std::memcpy(t.raw_mut(), v.data(), v.size() * sizeof(float));
  return t;
}

template <typename Owner>
Tensor Tensor::adopt(DType dtype, std::vector<int64_t> shape, Owner bytes) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = checked_numel(t.shape_);
  TCC_CHECK(t.numel_ >= 0 && bytes.size() == static_cast<size_t>(t.numel_) * dtype_size(dtype))
      << "byte size " << bytes.size() << " does not match " << shape_str(t.shape_);
  t.own(std::make_shared<Owner>(std::move(bytes)));
  return t;
}

Tensor Tensor::from_bytes(DType dtype, std::vector<int64_t> shape, std::vector<std::byte> bytes) {
  return adopt(dtype, std::move(shape), std::move(bytes));
}

Tensor Tensor::from_string_bytes(DType dtype, std::vector<int64_t> shape, std::string bytes) {
  return adopt(dtype, std::move(shape), std::move(bytes));
}

Tensor Tensor::shape_only(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = checked_numel(t.shape_);
  TCC_CHECK(t.numel_ >= 0) << "shape " << shape_str(t.shape_) << " has no element count";
  return t;
}

Tensor Tensor::sequence(DType elem, std::vector<Tensor> elements) {
  for (const Tensor& e : elements)
    TCC_CHECK(e.kind() == Kind::Tensor && e.dtype() == elem)
        << "a sequence of " << dtype_name(elem) << " holds a " << dtype_name(e.dtype()) << " element";
  Tensor t;
  t.kind_ = Kind::Sequence;
  t.dtype_ = elem;
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(elements));
  return t;
}

Tensor Tensor::optional(DType elem, std::vector<Tensor> element) {
  TCC_CHECK(element.size() <= 1) << "an optional holds " << element.size() << " elements";
  for (const Tensor& e : element)
    TCC_CHECK(e.kind() != Kind::Optional && e.dtype() == elem)
        << "an optional of " << dtype_name(elem) << " holds a " << dtype_name(e.dtype()) << " value";
  Tensor t;
  t.kind_ = Kind::Optional;
  t.dtype_ = elem;
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(element));
  return t;
}

const std::vector<Tensor>& Tensor::elements() const {
  TCC_CHECK(elements_) << "elements() of a tensor";
  return *elements_;
}

double Tensor::get_f64(int64_t i) const {
  const std::byte* p = raw() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ:
      return fp8_to_float(static_cast<uint8_t>(*p), dtype_);
    case DType::F4E2M1: return f4e2m1_to_float(static_cast<uint8_t>(*p));
    case DType::U64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    default: return static_cast<double>(get_i64(i));
  }
}

int64_t Tensor::get_i64(int64_t i) const {
  const std::byte* p = raw() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::I8: case DType::I4: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case DType::U64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<int64_t>(v); }
    case DType::U32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::U16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::U8: case DType::U4: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case DType::Bool: { uint8_t v; std::memcpy(&v, p, 1); return v != 0; }
    case DType::F32: case DType::F64: case DType::F16: case DType::BF16: case DType::F4E2M1:
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ: {
      double d = get_f64(i);
      if (!std::isfinite(d)) return 0;
      return static_cast<int64_t>(d);
    }
    default:
      TCC_CHECK(false) << "get_i64 on " << dtype_name(dtype_);
      return 0;
  }
}

namespace {
template <typename T>
void store(std::byte* p, T v) { std::memcpy(p, &v, sizeof(T)); }

// Float -> integer conversion that saturates instead of invoking undefined behaviour.
template <typename T>
T float_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
}  // namespace

void Tensor::set_f64(int64_t i, double v) {
  std::byte* p = raw_mut() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::F32: store<float>(p, static_cast<float>(v)); break;
    case DType::F64: store<double>(p, v); break;
    case DType::F16: store<uint16_t>(p, float_to_half(static_cast<float>(v))); break;
    case DType::BF16: store<uint16_t>(p, float_to_bf16(static_cast<float>(v))); break;
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ:
      store<uint8_t>(p, float_to_fp8(static_cast<float>(v), dtype_));
      break;
    case DType::F4E2M1: store<uint8_t>(p, float_to_f4e2m1(static_cast<float>(v))); break;
    // ONNX's tests take floats to the 4-bit integers through int64 and wrap them.
    case DType::I4: case DType::U4: set_i64(i, float_to_int<int64_t>(v)); break;
    case DType::I64: store<int64_t>(p, float_to_int<int64_t>(v)); break;
    case DType::I32: store<int32_t>(p, float_to_int<int32_t>(v)); break;
    case DType::I16: store<int16_t>(p, float_to_int<int16_t>(v)); break;
    case DType::I8: store<int8_t>(p, float_to_int<int8_t>(v)); break;
    case DType::U64: store<uint64_t>(p, float_to_int<uint64_t>(v)); break;
    case DType::U32: store<uint32_t>(p, float_to_int<uint32_t>(v)); break;
    case DType::U16: store<uint16_t>(p, float_to_int<uint16_t>(v)); break;
    case DType::U8: store<uint8_t>(p, float_to_int<uint8_t>(v)); break;
    case DType::Bool: store<uint8_t>(p, v != 0 ? 1 : 0); break;
    default: TCC_CHECK(false) << "set_f64 on " << dtype_name(dtype_);
  }
}

void Tensor::set_i64(int64_t i, int64_t v) {
  std::byte* p = raw_mut() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::I64: store<int64_t>(p, v); break;
    case DType::I32: store<int32_t>(p, static_cast<int32_t>(v)); break;
    case DType::I16: store<int16_t>(p, static_cast<int16_t>(v)); break;
    case DType::I8: store<int8_t>(p, static_cast<int8_t>(v)); break;
    case DType::U64: store<uint64_t>(p, static_cast<uint64_t>(v)); break;
    case DType::U32: store<uint32_t>(p, static_cast<uint32_t>(v)); break;
    case DType::U16: store<uint16_t>(p, static_cast<uint16_t>(v)); break;
    case DType::U8: store<uint8_t>(p, static_cast<uint8_t>(v)); break;
    case DType::I4: store<int8_t>(p, static_cast<int8_t>(wrap_int4(v, dtype_))); break;
    case DType::U4: store<uint8_t>(p, static_cast<uint8_t>(wrap_int4(v, dtype_))); break;
    case DType::Bool: store<uint8_t>(p, v != 0 ? 1 : 0); break;
    default: set_f64(i, static_cast<double>(v));
  }
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> v(numel_);
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_i64(i);
  return v;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  TCC_CHECK(checked_numel(shape) == numel_) << shape_str(shape_) << " -> " << shape_str(shape);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::cast(DType to) const {
  Tensor t(to, shape_);
  if (to == dtype_) {
    if (dtype_ == DType::String) *t.strings_ = *strings_;
    else std::memcpy(t.raw_mut(), raw(), nbytes());
    return t;
  }
  TCC_CHECK(to != DType::String && dtype_ != DType::String) << "string casts are not supported";
  bool src_int = !is_float(dtype_);
  for (int64_t i = 0; i < numel_; ++i) {
    if (src_int && (is_integer(to) || to == DType::Bool)) t.set_i64(i, get_i64(i));
    else t.set_f64(i, get_f64(i));
  }
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = *this;
  if (elements_) {
    std::vector<Tensor> copies;
    for (const Tensor& e : *elements_) copies.push_back(e.clone());
    t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(copies));
    return t;
  }
  t.own(std::make_shared<std::vector<std::byte>>(raw(), raw() + nbytes_));
  if (strings_) t.strings_ = std::make_shared<std::vector<std::string>>(*strings_);
  return t;
}

bool Tensor::identical(const Tensor& o) const {
  if (kind_ != o.kind_ || dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (elements_) {
    const std::vector<Tensor>& a = *elements_;
    const std::vector<Tensor>& b = *o.elements_;
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].identical(b[i])) return false;
    return true;
  }
  if (dtype_ == DType::String) return *strings_ == *o.strings_;
  return nbytes() == o.nbytes() && std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

std::vector<std::vector<int64_t>> all_indices(const std::vector<int64_t>& shape) {
  std::vector<std::vector<int64_t>> out;
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d <= 0; })) return out;
  for (std::vector<int64_t> index(shape.size(), 0);;) {
    out.push_back(index);
    size_t d = shape.size();
    while (d > 0 && ++index[d - 1] == shape[d - 1]) index[--d] = 0;
    if (d == 0) return out;
  }
}

}  // namespace tcc
