#include "src/ops/op_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tcc {

int64_t normalize_axis(const Node& n, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

DType dtype_attr(const Node& n, DType fallback, const std::string& attr) {
  if (!n.has_attr(attr)) return fallback;
  int64_t v = n.get_int(attr, 0);
  std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(v));
  if (!d || *d == DType::Undefined) n.fail(attr + " " + std::to_string(v) + " is not an element type tcc models");
  return *d;
}

double rounded(double v, DType t) {
  switch (t) {
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::BF16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ:
      return fp8_to_float(float_to_fp8(static_cast<float>(v), t), t);
    case DType::F4E2M1: return f4e2m1_to_float(float_to_f4e2m1(static_cast<float>(v)));
    default: return v;
  }
}

Dims broadcast_dims(InferContext& ctx, const std::vector<Dims>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Dims out(rank, Dim(1));
  for (size_t k = 0; k < rank; ++k) {
    Dim acc(1);
    for (const auto& s : shapes) {
      if (k + s.size() < rank) continue;  // this input has no dim here: implicitly 1
      const Dim& d = s[k + s.size() - rank];
      if (d.is_static() && d.value() == 1) continue;
      if (acc.is_static() && acc.value() == 1) {
        acc = d;
        continue;
      }
      if (d.is_unknown() || acc == d) continue;
      if (acc.is_unknown()) {
        acc = d;
        continue;
      }
      if (!ctx.env().unify(acc, d, &ctx.node()))
        ctx.fail("cannot broadcast dimension " + acc.str() + " with " + d.str() + " (axis " +
                 std::to_string(k) + " of the broadcast result)");
      acc = ctx.env().canonical(acc);
    }
    out[k] = acc;
  }
  return out;
}

std::vector<int64_t> broadcast_shapes(const Node& n, const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] == 1) continue;
      if (o != 1 && o != s[i])
        n.fail("cannot broadcast shapes: size " + std::to_string(o) + " against " + std::to_string(s[i]));
      o = s[i];
    }
  return out;
}

BroadcastIndexer::BroadcastIndexer(const std::vector<int64_t>& out_shape, const std::vector<int64_t>& in_shape)
    : out_shape_(out_shape), in_strides_(out_shape.size(), 0) {
  identity_ = out_shape == in_shape;
  std::vector<int64_t> st = row_major_strides(in_shape);
  size_t off = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) in_strides_[off + i] = in_shape[i] == 1 ? 0 : st[i];
}

int64_t BroadcastIndexer::operator()(int64_t out_index) const {
  if (identity_) return out_index;
  int64_t in = 0;
  for (size_t k = out_shape_.size(); k-- > 0;) {
    int64_t d = out_shape_[k];
    in += (out_index % d) * in_strides_[k];
    out_index /= d;
  }
  return in;
}

Dims dims_of(const std::vector<int64_t>& shape) { return Dims(shape.begin(), shape.end()); }

Tensor map_float(const Node& n, const std::vector<const Tensor*>& ins, DType out_dtype,
                 double (*fn)(const std::vector<double>&)) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor* t : ins) shapes.push_back(t->shape());
  std::vector<int64_t> out_shape = broadcast_shapes(n, shapes);
  Tensor out(out_dtype, out_shape);
  std::vector<BroadcastIndexer> idx;
  for (const Tensor* t : ins) idx.emplace_back(out_shape, t->shape());
  std::vector<double> args(ins.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    for (size_t k = 0; k < ins.size(); ++k) args[k] = ins[k]->get_f64(idx[k](i));
    out.set_f64(i, fn(args));
  }
  return out;
}

void copy_element(Tensor& dst, int64_t di, const Tensor& src, int64_t si) {
  TCC_CHECK(dst.dtype() == src.dtype()) << dtype_name(dst.dtype()) << " vs " << dtype_name(src.dtype());
  if (src.dtype() == DType::String) {
    dst.strings_mut()[di] = src.strings()[si];
    return;
  }
  size_t w = dtype_size(src.dtype());
  std::memcpy(dst.raw_mut() + di * w, src.raw() + si * w, w);
}

std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  return idx;
}

void advance(std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (size_t k = shape.size(); k-- > 0;) {
    if (++idx[k] < shape[k]) return;
    idx[k] = 0;
  }
}

int64_t flat_index(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t f = 0;
  for (size_t k = 0; k < idx.size(); ++k) f += idx[k] * strides[k];
  return f;
}

int64_t product(const std::vector<int64_t>& v, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

const Type& ranked_nchw(InferContext& ctx, size_t i) {
  const Type& t = ctx.ranked_input(i);
  if (t.rank() < 3)
    ctx.fail("expected input " + std::to_string(i) + " of rank >= 3 ([N, C, spatial...]), got " + t.str());
  return t;
}

void check_nchw(const EvalContext& ctx, const Tensor& x) {
  if (x.rank() < 3) ctx.fail("expected an input of rank >= 3 ([N, C, spatial...]), got shape " + shape_str(x.shape()));
}

void require_numeric(const Node& n, DType dt, const char* what) {
  if (dt == DType::String) n.fail(std::string(what) + " must hold numbers, got string");
}

double cubic_convolution(double d, double a) {
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0.0;
}

std::optional<Dims> input_values(InferContext& ctx, size_t i) {
  const Dims* v = ctx.has_input(i) ? ctx.input_values(i) : nullptr;
  if (!v) return std::nullopt;
  return ctx.env().canonical(*v);
}

bool inputs_ranked(InferContext& ctx, std::initializer_list<size_t> inputs) {
  for (size_t i : inputs) {
    if (!ctx.has_input(i)) ctx.fail("input " + std::to_string(i) + " is required");
    const Type& t = ctx.input_type(i);
    if (t.is_tensor() && t.has_rank()) continue;
    if (!t.is_tensor() && !t.is_unknown())
      ctx.fail("input " + std::to_string(i) + " must be a tensor, got " + t.str());
    ctx.set_output_type(0, Type::tensor_unranked(ctx.input_type(0).dtype()));
    return false;
  }
  return true;
}

const Type* ranked_or_unranked_output(InferContext& ctx, DType out_dtype) {
  const Type& t = ctx.input_type(0);
  if (t.is_tensor() && t.has_rank()) return &t;
  if (out_dtype == DType::Undefined && t.is_tensor()) out_dtype = t.dtype();
  ctx.set_output_type(0, Type::tensor_unranked(out_dtype));
  return nullptr;
}

DType input_dtype(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return DType::Undefined;
  const Type& t = ctx.input_type(i);
  return t.is_tensor() ? t.dtype() : DType::Undefined;
}

void require_one_dtype(InferContext& ctx, size_t first, const std::vector<size_t>& others) {
  DType dt = input_dtype(ctx, first);
  if (dt == DType::Undefined) return;
  for (size_t i : others)
    if (input_dtype(ctx, i) != DType::Undefined && input_dtype(ctx, i) != dt)
      ctx.fail("inputs must have one element type: input " + std::to_string(first) + " is " +
               std::string(dtype_name(dt)) + ", input " + std::to_string(i) + " is " +
               std::string(dtype_name(input_dtype(ctx, i))));
}

void require_index_vector(InferContext& ctx, size_t i, const std::string& what) {
  if (!ctx.has_input(i)) return;
  const Type& t = ctx.input_type(i);
  if (t.is_unknown()) return;
  if (!t.is_tensor() || (t.dtype() != DType::Undefined && !is_integer(t.dtype())) || (t.has_rank() && t.rank() != 1))
    ctx.fail(what + " must be a 1-D integer tensor, got " + t.str());
}

std::optional<std::vector<int64_t>> static_values(const Dims* values) {
  if (!values) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *values) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

std::string sliding_window(const Node& n, const std::vector<int64_t>& kernel, const std::vector<int64_t>& in,
                           SlidingWindow* w) {
  size_t ns = kernel.size();
  w->strides = n.get_ints("strides", std::vector<int64_t>(ns, 1));
  w->dilations = n.get_ints("dilations", std::vector<int64_t>(ns, 1));
  std::vector<int64_t> pads = n.get_ints("pads", std::vector<int64_t>(2 * ns, 0));
  if (w->strides.size() != ns || w->dilations.size() != ns || pads.size() != 2 * ns ||
      std::any_of(w->strides.begin(), w->strides.end(), [](int64_t s) { return s < 1; }) ||
      std::any_of(w->dilations.begin(), w->dilations.end(), [](int64_t d) { return d < 1; }))
    return "malformed strides, dilations or pads";
  std::string auto_pad = n.get_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads.assign(2 * ns, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < ns; ++i) {
      if (in[i] < 0) return "SAME padding of a symbolic spatial dim";
      int64_t out = (in[i] + w->strides[i] - 1) / w->strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w->strides[i] + w->dilations[i] * (kernel[i] - 1) + 1 - in[i]);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[ns + i] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    return "unknown auto_pad '" + auto_pad + "'";
  }
  w->begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(ns));
  w->end.assign(pads.begin() + static_cast<std::ptrdiff_t>(ns), pads.end());
  return "";
}

Dims parse_shape_attr(const Node& n, const std::string& attr) {
  const Attribute* a = n.attr(attr);
  if (a == nullptr || a->kind != Attribute::Kind::Strings)
    n.fail("needs a '" + attr + "' attribute listing dims as symbolic expressions, e.g. [\"batch\", \"seq*12\"]");
  Dims dims;
  for (const std::string& text : a->strings) {
    std::optional<SymExpr> e = SymExpr::parse(text);
    if (!e) n.fail("'" + text + "' in " + attr + " is not a symbolic expression");
    if (e->is_constant() && e->constant_value() < 0) n.fail("'" + text + "' in " + attr + " is negative");
    dims.push_back(Dim(*e));
  }
  return dims;
}

std::vector<int64_t> eval_shape_attr(const EvalContext& ctx, const std::string& attr) {
  std::vector<int64_t> shape;
  for (const Dim& d : parse_shape_attr(ctx.node(), attr)) {
    std::optional<int64_t> v = d.expr().evaluate(ctx.symbols());
    if (!v) {
      std::string missing;
      for (const std::string& s : d.expr().symbols())
        if (!ctx.symbols().count(s)) missing += (missing.empty() ? "'" : ", '") + s + "'";
      ctx.fail("cannot evaluate the dim '" + d.str() + "': no graph input binds " +
               (missing.empty() ? "its symbols" : missing));
    }
    if (*v < 0) ctx.fail("the dim '" + d.str() + "' evaluates to " + std::to_string(*v));
    shape.push_back(*v);
  }
  return shape;
}

std::vector<std::pair<Dim, Dim>> tcc_pads(const Node& n, size_t rank) {
  Dims pads = parse_shape_attr(n, "pads");
  if (pads.size() != 2 * rank)
    n.fail("pads has " + std::to_string(pads.size()) + " entries for rank " + std::to_string(rank) +
           ", expected a begin and an end per axis");
  std::vector<std::pair<Dim, Dim>> out;
  for (size_t k = 0; k < rank; ++k) out.emplace_back(pads[k], pads[rank + k]);
  return out;
}

Attribute shape_attr(const Dims& dims) {
  std::vector<std::string> texts;
  for (const Dim& d : dims) texts.push_back(d.str());
  return Attribute::of_strings(std::move(texts));
}

}  // namespace tcc
