#include "src/module/manifest_records.h"

#include <climits>
#include <optional>

#include "src/ir/tensor.h"

namespace tcc {

using ojson = nlohmann::ordered_json;

namespace {

SymExpr read_size(const ManifestField& f, const SizeCheck& check) {
  SymExpr e = f.expr();
  check(e, f);
  return e;
}

std::vector<SymExpr> read_shape(const ManifestField& f, const SizeCheck& check) {
  std::vector<SymExpr> shape = f.shape();
  for (const SymExpr& d : shape) check(d, f);
  return shape;
}

int read_buffer(const ManifestField& f, int64_t lo, int count) { return static_cast<int>(f.integer(lo, count - 1)); }

std::string read_activation(const ManifestField& f, std::initializer_list<const char*> known) {
  std::string a = f.str();
  for (const char* k : known)
    if (a == k) return a;
  f.fail("unknown activation '" + a + "'");
}

std::string shape_text(const std::vector<SymExpr>& shape) {
  std::string text;
  for (const SymExpr& d : shape) text += (text.empty() ? "" : ", ") + d.str();
  return "[" + text + "]";
}

}  // namespace

ojson tensor_json(const TensorSig& t) {
  return {{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", shape_json(t.shape)}};
}

TensorSig read_tensor(const ManifestField& f, const SizeCheck& check) {
  return {f["name"].str(), f["dtype"].dtype(), read_shape(f["shape"], check)};
}

ojson structured_json(const StructuredValue& v) {
  if (v.kind == StructuredValue::Kind::Tensor) return v.name;
  ojson elements = ojson::array();
  for (const StructuredValue& e : v.elements) elements.push_back(structured_json(e));
  return {{"name", v.name},
          {"kind", v.kind == StructuredValue::Kind::Sequence ? "sequence" : "optional"},
          {"length", v.elements.size()},
          {"elements", elements}};
}

StructuredValue read_structured(const ManifestField& f) {
  if (f.raw().is_string()) return {StructuredValue::Kind::Tensor, f.str(), {}};
  StructuredValue v;
  v.name = f["name"].str();
  std::string kind = f["kind"].str();
  if (kind != "sequence" && kind != "optional") f["kind"].fail("expected \"sequence\" or \"optional\"");
  v.kind = kind == "sequence" ? StructuredValue::Kind::Sequence : StructuredValue::Kind::Optional;
  ManifestField elements = f["elements"];
  for (size_t i = 0; i < elements.size(); ++i) v.elements.push_back(read_structured(elements[i]));
  if (f["length"].integer() != static_cast<int64_t>(v.elements.size()))
    f["length"].fail("expected the number of elements, " + std::to_string(v.elements.size()));
  if (v.kind == StructuredValue::Kind::Optional && v.elements.size() > 1) f["elements"].fail("expected at most one");
  return v;
}

ojson placed_json(const PlacedTensor& t) {
  ojson j = tensor_json(t.sig);
  j["offset"] = size_json(t.offset);
  j["nbytes"] = size_json(t.nbytes);
  return j;
}

PlacedTensor read_placed(const ManifestField& f, const SizeCheck& check) {
  return {read_tensor(f, check), read_size(f["offset"], check), read_size(f["nbytes"], check)};
}

PlacedTensor read_weight(const ManifestField& f, int64_t alignment) {
  ManifestField shape = f["shape"];
  TensorSig sig{f["name"].str(), f["dtype"].dtype(), shape.shape()};
  std::vector<int64_t> dims;
  for (size_t d = 0; d < sig.shape.size(); ++d) {
    if (!sig.shape[d].is_constant()) shape[d].fail("a weight's dims must be static");
    dims.push_back(sig.shape[d].constant_value());
  }
  int64_t numel = checked_numel(dims);
  int64_t offset = f["offset"].integer(0, INT64_MAX);
  int64_t nbytes = f["nbytes"].integer(0, INT64_MAX);
  const int64_t size = static_cast<int64_t>(dtype_size(sig.dtype));
  if (numel < 0 || nbytes / size != numel || nbytes % size != 0)
    f["nbytes"].fail(std::to_string(nbytes) + " bytes do not hold " + std::string(dtype_name(sig.dtype)) +
                     shape_str(dims));
  if (offset % alignment != 0) f["offset"].fail("not " + std::to_string(alignment) + "-byte aligned");
  return {std::move(sig), SymExpr::constant(offset), SymExpr::constant(nbytes)};
}

ojson param_json(const KernelParam& p) {
  return {{"dtype", dtype_name(p.dtype)}, {"shape", shape_json(p.shape)}, {"output", p.output}};
}

KernelParam read_param(const ManifestField& f, const SizeCheck& check) {
  return {f["dtype"].dtype(), read_shape(f["shape"], check), f["output"].boolean()};
}

ojson gemm_json(const GemmDesc& g, int algo) {
  auto s = [](const SymExpr& e) { return e.str(); };
  return {{"a", g.a},
          {"b", g.b},
          {"trans_a", g.trans_a},
          {"trans_b", g.trans_b},
          {"batch", s(g.batch)},
          {"m", s(g.m)},
          {"n", s(g.n)},
          {"k", s(g.k)},
          {"lda", s(g.lda)},
          {"ldb", s(g.ldb)},
          {"ldd", s(g.ldd)},
          {"stride_a", s(g.stride_a)},
          {"stride_b", s(g.stride_b)},
          {"stride_d", s(g.stride_d)},
          {"alpha", g.alpha},
          {"beta", g.beta},
          {"bias", g.bias},
          {"residual", g.residual},
          {"activation", g.activation},
          {"algo", algo}};
}

GemmDesc read_gemm(const ManifestField& f, int num_buffers, const SizeCheck& check) {
  GemmDesc g;
  g.a = read_buffer(f["a"], 0, num_buffers);
  g.b = read_buffer(f["b"], 0, num_buffers);
  g.bias = read_buffer(f["bias"], -1, num_buffers);
  g.residual = read_buffer(f["residual"], -1, num_buffers);
  g.trans_a = f["trans_a"].boolean();
  g.trans_b = f["trans_b"].boolean();
  g.batch = read_size(f["batch"], check);
  g.m = read_size(f["m"], check);
  g.n = read_size(f["n"], check);
  g.k = read_size(f["k"], check);
  g.lda = read_size(f["lda"], check);
  g.ldb = read_size(f["ldb"], check);
  g.ldd = read_size(f["ldd"], check);
  g.stride_a = read_size(f["stride_a"], check);
  g.stride_b = read_size(f["stride_b"], check);
  g.stride_d = read_size(f["stride_d"], check);
  g.alpha = f["alpha"].number();
  g.beta = f["beta"].number();
  g.activation = read_activation(f["activation"], {"none", "relu", "gelu_tanh"});
  return g;
}

ojson conv_json(const ConvDesc& c, int algo) {
  return {{"x", c.x},
          {"w", c.w},
          {"n", size_json(c.n)},
          {"c", size_json(c.c)},
          {"k", size_json(c.k)},
          {"in", shape_json(c.in)},
          {"out", shape_json(c.out)},
          {"kernel", c.kernel},
          {"strides", c.strides},
          {"dilations", c.dilations},
          {"pads", c.pads},
          {"groups", c.groups},
          {"bias", c.bias},
          {"residual", c.residual},
          {"activation", c.activation},
          {"algo", algo}};
}

ConvDesc read_conv(const ManifestField& f, const std::vector<KernelParam>& params, int num_reads,
                   const SizeCheck& check) {
  ConvDesc c;
  c.x = read_buffer(f["x"], 0, num_reads);
  c.w = read_buffer(f["w"], 0, num_reads);
  c.bias = read_buffer(f["bias"], -1, num_reads);
  c.residual = read_buffer(f["residual"], -1, num_reads);
  c.n = read_size(f["n"], check);
  c.c = read_size(f["c"], check);
  c.k = read_size(f["k"], check);
  auto ints = [&](const char* key, int64_t lo) {
    ManifestField a = f[key];
    std::vector<int64_t> v;
    for (size_t i = 0; i < a.size(); ++i) v.push_back(a[i].integer(lo, INT32_MAX));
    return v;
  };
  c.kernel = ints("kernel", 1);
  c.strides = ints("strides", 1);
  c.dilations = ints("dilations", 1);
  c.pads = ints("pads", 0);
  size_t ns = c.kernel.size();
  if (ns < 1 || ns > 3) f["kernel"].fail("expected 1 to 3 spatial dims, got " + std::to_string(ns));
  for (const char* key : {"strides", "dilations", "pads", "in", "out"})
    if (f[key].size() != ns) f[key].fail("expected " + std::to_string(ns) + " values, one per spatial dim");
  c.in = read_shape(f["in"], check);
  c.out = read_shape(f["out"], check);
  c.groups = f["groups"].integer(1, INT32_MAX);
  c.activation = read_activation(f["activation"], {"none", "relu"});

  // The operands against the kernel's parameters: x [n, c, in...], w [k, c /
  // groups, kernel...], the first output y [n, k, out...], a bias of k
  // elements, a residual shaped like y, all of one float dtype.
  const KernelParam& y = params[static_cast<size_t>(num_reads)];
  if (!is_float(y.dtype)) f.fail("convolves " + std::string(dtype_name(y.dtype)) + "; expected a float dtype");
  auto expect_shape = [&](const char* key, int index, const std::vector<SymExpr>& want) {
    const KernelParam& b = params[static_cast<size_t>(index)];
    if (b.dtype != y.dtype) f[key].fail("buffer " + std::to_string(index) + " is not " + std::string(dtype_name(y.dtype)));
    if (b.shape != want) f[key].fail("buffer " + std::to_string(index) + " does not have the shape " + shape_text(want));
  };
  std::optional<SymExpr> per_group = c.c.exact_div(SymExpr::constant(c.groups));
  if (!per_group || !c.k.exact_div(SymExpr::constant(c.groups))) f["groups"].fail("does not divide c and k");
  std::vector<SymExpr> xs = {c.n, c.c}, ws = {c.k, *per_group}, ys = {c.n, c.k};
  xs.insert(xs.end(), c.in.begin(), c.in.end());
  for (int64_t r : c.kernel) ws.push_back(SymExpr::constant(r));
  ys.insert(ys.end(), c.out.begin(), c.out.end());
  expect_shape("x", c.x, xs);
  expect_shape("w", c.w, ws);
  expect_shape("out", num_reads, ys);
  if (c.residual >= 0) expect_shape("residual", c.residual, ys);
  if (c.bias >= 0) {
    const KernelParam& b = params[static_cast<size_t>(c.bias)];
    SymExpr numel = SymExpr::constant(1);
    for (const SymExpr& d : b.shape) numel = numel * d;
    if (b.dtype != y.dtype || numel != c.k)
      f["bias"].fail("buffer " + std::to_string(c.bias) + " is not " + std::string(dtype_name(y.dtype)) +
                     " with k elements");
  }
  return c;
}

int read_algo(const ManifestField& call) {
  return call.has("algo") ? static_cast<int>(call["algo"].integer(0, kLibraryAlgos - 1)) : 0;
}

ojson launch_json(const KernelLaunch& l) {
  ojson j = {{"grid", {l.grid[0].str(), l.grid[1].str(), l.grid[2].str()}},
             {"block", {l.block[0], l.block[1], l.block[2]}},
             {"shared_bytes", l.shared_bytes}};
  if (l.workspace_bytes != SymExpr()) j["workspace_bytes"] = size_json(l.workspace_bytes);
  if (l.zero_outputs) j["zero_outputs"] = true;
  if (l.copy_from >= 0) j["copy_from"] = l.copy_from;
  if (l.random_offset) j["random_offset"] = true;
  return j;
}

KernelLaunch read_launch(const ManifestField& f, KernelKind kind, const std::vector<KernelParam>& params,
                         int num_reads, const SizeCheck& check) {
  KernelLaunch l;
  if (f["grid"].size() != 3) f["grid"].fail("expected 3 extents");
  if (f["block"].size() != 3) f["block"].fail("expected 3 extents");
  for (size_t d = 0; d < 3; ++d) {
    l.grid[d] = read_size(f["grid"][d], check);
    l.block[d] = static_cast<int>(f["block"][d].integer(1, 1024));
  }
  l.shared_bytes = static_cast<int>(f["shared_bytes"].integer(0, 1 << 30));
  if (f.has("workspace_bytes")) {
    ManifestField ws = f["workspace_bytes"];
    l.workspace_bytes = read_size(ws, check);
    if (kind != KernelKind::Reduction && kind != KernelKind::Gemm && kind != KernelKind::Nms)
      ws.fail("only split reductions, split-K gemm templates and NMS kernels take a workspace");
    if (l.workspace_bytes.is_constant() && l.workspace_bytes.constant_value() <= 0)
      ws.fail("expected a positive byte count, got " + l.workspace_bytes.str());
  }
  l.zero_outputs = f.has("zero_outputs") && f["zero_outputs"].boolean();
  if (f.has("copy_from")) {
    ManifestField from = f["copy_from"];
    l.copy_from = read_buffer(from, 0, num_reads);
    const KernelParam &in = params[static_cast<size_t>(l.copy_from)], &out = params.back();
    if (l.zero_outputs || params.size() != static_cast<size_t>(num_reads) + 1 || in.dtype != out.dtype ||
        in.shape != out.shape)
      from.fail("expected an input of the dtype and shape of the kernel's one output, which is not zeroed");
  }
  l.random_offset = f.has("random_offset") && f["random_offset"].boolean();
  if (l.random_offset && kind != KernelKind::Pointwise && kind != KernelKind::Reduction)
    f["random_offset"].fail("only pointwise and reduction kernels read the random offset");
  return l;
}

}  // namespace tcc
