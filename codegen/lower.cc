// Lowering a fusion node to a kernel.
//
// Every body value is computed at one point of the kernel domain. How a value's
// axes line up with the domain follows NumPy broadcasting: the value's shape is
// right-aligned against a frame (the domain for pointwise kernels; the reduced
// input's shape, or its kept axes after a keepdims=0 reduction, for reduction
// kernels; the MatMul or Conv output for gemm and conv kernels), and a frame axis is one domain
// axis. Loads of body inputs compose the movement ops on them into one affine
// index, so transposes, slices and broadcasts never copy.
#include "codegen/lower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>

#include "codegen/lowering.h"

#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace lowering {

SymExpr product(const std::vector<SymExpr>& es, size_t begin, size_t end) {
  SymExpr p = c(1);
  for (size_t i = begin; i < end; ++i) p = p * es[i];
  return p;
}

std::vector<SymExpr> row_major(const std::vector<SymExpr>& shape) {
  std::vector<SymExpr> strides(shape.size());
  SymExpr s = c(1);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s = s * shape[i];
  }
  return strides;
}

std::string who(const Node& n) { return "'" + n.name() + "' (" + n.op_type() + ")"; }

bool is_reduction(const Node& n) { return kernel_role(n) == KernelRole::Reduction; }
bool is_movement(const Node& n) { return kernel_role(n) == KernelRole::Movement; }
bool is_scan(const Node& n) { return n.domain().empty() && n.op_type() == "CumSum"; }
bool is_scatter(const Node& n) {
  if (n.domain() == kTccDomain) return n.op_type() == "ScatterAdd";
  return n.domain().empty() && (n.op_type() == "ScatterElements" || n.op_type() == "ScatterND");
}

Lowering::Lowering(const Node& fusion, const std::string& name, Precision precision)
    : fusion_(fusion), body_(fusion_body(fusion)), precision_(precision) {
  k_.name = name;
}

kir::Kernel Lowering::run() {
  if (std::string why = verify_fusion(fusion_); !why.empty()) throw InternalError(why);
  for (const auto& n : body_.nodes()) k_.nodes.push_back(n->name().empty() ? n->op_type() : n->name());
  for (size_t i = 0; i < fusion_.num_inputs(); ++i) add_buffer(fusion_.input(i), false);
  for (size_t i = 0; i < fusion_.num_outputs(); ++i) add_buffer(fusion_.output(i), true);
  const Node* scatter = nullptr;    // iterates its updates, stores by index
  const Node* scan = nullptr;       // scans its rows, stores each element
  const Node* attention = nullptr;  // stores its outputs itself
  const Node* topk = nullptr;       // stores its outputs itself
  const Node* recurrence = nullptr; // writes its outputs itself
  const Node* nms = nullptr;        // writes its outputs itself
  const Node* roi_align = nullptr;  // writes its output itself
  for (const auto& n : body_.nodes()) {
    if (is_scatter(*n)) scatter = n.get();
    if (is_scan(*n)) scan = n.get();
    if (kernel_role(*n) == KernelRole::Attention) attention = n.get();
    if (kernel_role(*n) == KernelRole::TopK) topk = n.get();
    if (kernel_role(*n) == KernelRole::Recurrence) recurrence = n.get();
    if (kernel_role(*n) == KernelRole::Nms) nms = n.get();
    if (kernel_role(*n) == KernelRole::RoiAlign) roi_align = n.get();
  }
  switch (fusion_kind(fusion_)) {
    case FusionKind::Pointwise:
    case FusionKind::Single:
      if (attention) setup_attention(*attention);
      else if (topk) setup_topk(*topk);
      else if (recurrence) setup_recurrence(*recurrence);
      else if (nms) setup_nms(*nms);
      else if (roi_align) setup_roi_align(*roi_align);
      else if (scatter) setup_scatter(*scatter);
      else if (scan) setup_scan(*scan);
      else setup_pointwise();
      break;
    case FusionKind::Reduction:
      setup_reduction();
      break;
    case FusionKind::Gemm:
      setup_gemm();
      break;
    case FusionKind::Conv:
      setup_conv();
      break;
  }
  if (scatter) lower_scatter(*scatter);
  else if (scan) lower_scan(*scan);
  else if (!attention && !topk && !recurrence && !nms && !roi_align)
    for (size_t j = 0; j < body_.outputs().size(); ++j)
      store_output(body_.outputs()[j], static_cast<int>(fusion_.num_inputs() + j));
  collect_size_params();
  return std::move(k_);
}

void Lowering::fail(const Node* body_node, const std::string& msg) const {
  std::string where = "lowering fusion " + who(fusion_) + ": ";
  if (body_node != nullptr) where += "body node " + who(*body_node) + ": ";
  throw InternalError(where + msg);
}

std::vector<SymExpr> Lowering::shape_of(const Value* v) const {
  const Type& t = v->type();
  if (!t.is_tensor() || !t.fully_shaped()) fail(v->producer(), "value '" + v->name() + "' has type " + t.str() + ", not a fully shaped tensor");
  std::vector<SymExpr> shape;
  for (const Dim& d : t.shape()) shape.push_back(d.expr());
  return shape;
}

void Lowering::add_buffer(const Value* v, bool output) {
  k_.buffers.push_back(kir::Buffer{v->name(), v->type().dtype(), shape_of(v), output});
}

int Lowering::input_buffer(const Value* v) const {
  const auto& ins = body_.inputs();
  auto it = std::find(ins.begin(), ins.end(), v);
  TCC_CHECK(it != ins.end()) << "'" << v->name() << "' is not an input of the body of " << fusion_.name();
  return static_cast<int>(it - ins.begin());
}

std::vector<int> Lowering::iota(size_t n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Whether `small` broadcasts to `big` (right-aligned, each dim equal or 1).
bool Lowering::broadcasts_to(const std::vector<SymExpr>& small, const std::vector<SymExpr>& big) {
  if (small.size() > big.size()) return false;
  size_t lead = big.size() - small.size();
  for (size_t k = 0; k < small.size(); ++k)
    if (!is_one(small[k]) && small[k] != big[lead + k]) return false;
  return true;
}

// The domain is the output every other output broadcasts to; smaller outputs
// store the same element from several points, which is harmless.
void Lowering::setup_pointwise() {
  k_.kind = kir::Kind::Pointwise;
  for (const Value* candidate : body_.outputs()) {
    std::vector<SymExpr> shape = shape_of(candidate);
    bool covers = std::all_of(body_.outputs().begin(), body_.outputs().end(),
                              [&](const Value* o) { return broadcasts_to(shape_of(o), shape); });
    if (!covers) continue;
    k_.domain = shape;
    frames_.push_back(Frame{shape, iota(shape.size())});
    return;
  }
  fail(nullptr, "no output's shape covers the others");
}

void Lowering::setup_reduction() {
  k_.kind = kir::Kind::Reduction;
  const Node* first = nullptr;
  for (const auto& n : body_.nodes())
    if (is_reduction(*n)) {
      first = n.get();
      break;
    }
  TCC_CHECK(first != nullptr) << "verify_fusion passed a reduction body without reductions";
  std::optional<std::vector<int64_t>> axes = reduction_axes(*first);
  if (!axes) fail(first, "the reduced axes are not constant");
  axes_ = *axes;
  std::vector<SymExpr> x = shape_of(first->input(0));
  std::vector<int> to_domain(x.size());
  std::vector<SymExpr> kept;
  for (size_t a = 0; a < x.size(); ++a) {
    if (std::binary_search(axes_.begin(), axes_.end(), static_cast<int64_t>(a))) continue;
    to_domain[a] = static_cast<int>(k_.domain.size());
    k_.domain.push_back(x[a]);
    kept.push_back(x[a]);
  }
  for (int64_t a : axes_) {
    to_domain[a] = static_cast<int>(k_.domain.size());
    k_.domain.push_back(x[a]);
  }
  k_.reduce_axes = static_cast<int>(axes_.size());
  frames_.push_back(Frame{x, to_domain});
  frames_.push_back(Frame{kept, iota(kept.size())});
}

// For each axis of v: the domain axis it runs along in `frame`, or -1 for an
// axis of extent 1 (its coordinate is always 0).
std::vector<int> Lowering::axis_map(const Value* v, int frame) const {
  const Frame& f = frames_.at(frame);
  std::vector<SymExpr> shape = shape_of(v);
  if (shape.size() > f.shape.size())
    fail(v->producer(), "'" + v->name() + "' has more axes than the kernel domain it is computed over");
  size_t lead = f.shape.size() - shape.size();
  std::vector<int> map(shape.size(), -1);
  for (size_t k = 0; k < shape.size(); ++k) {
    if (is_one(shape[k])) continue;
    if (shape[k] != f.shape[lead + k])
      fail(v->producer(), "'" + v->name() + "' of shape " + v->type().str() +
                              " does not line up with the kernel domain");
    map[k] = f.to_domain[lead + k];
  }
  return map;
}

kir::Index Lowering::index_of(const View& view, const std::vector<int>& map) const {
  kir::Index ix{std::vector<SymExpr>(k_.domain.size()), view.offset};
  for (size_t k = 0; k < map.size(); ++k)
    if (map[k] >= 0) ix.strides[map[k]] = ix.strides[map[k]] + view.strides[k];
  return ix;
}

View Lowering::contiguous(int buffer, std::vector<SymExpr> shape) const {
  std::vector<SymExpr> strides = row_major(shape);
  return View{buffer, std::move(shape), std::move(strides), SymExpr()};
}

// Strides with every axis of extent 1 zeroed: such an axis is never stepped,
// so views that differ only there address the same elements.
std::vector<SymExpr> Lowering::stepped_strides(const View& v) {
  std::vector<SymExpr> s = v.strides;
  for (size_t k = 0; k < s.size(); ++k)
    if (is_one(v.shape[k])) s[k] = SymExpr();
  return s;
}

View Lowering::view_of(const Value* v) {
  if (is_body_input(v)) return contiguous(input_buffer(v), shape_of(v));
  const Node* p = v->producer();
  if (p == nullptr || !is_movement(*p)) fail(p, "'" + v->name() + "' is not a view of a body input");
  View in = view_of(p->input(0));
  std::vector<SymExpr> out_shape = shape_of(v);
  const std::string& op = p->op_type();
  if (op == "Identity") return in;
  if (op == "Transpose") return transpose(*p, in, out_shape);
  if (op == "Expand") return expand(*p, in, out_shape);
  if (op == "Slice") return slice(*p, in, out_shape);
  if (is_reshape(*p)) return reshape(*p, in, out_shape);
  fail(p, "is not a movement op the lowering composes into a load");
}

View Lowering::transpose(const Node& p, const View& in, std::vector<SymExpr> out_shape) const {
  std::vector<int64_t> perm = p.get_ints("perm");
  if (perm.empty())
    for (size_t i = in.shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != in.shape.size()) fail(&p, "perm does not match the input rank");
  View out{in.buffer, std::move(out_shape), {}, in.offset};
  for (int64_t a : perm) out.strides.push_back(in.strides.at(static_cast<size_t>(a)));
  return out;
}

View Lowering::expand(const Node& p, const View& in, std::vector<SymExpr> out_shape) const {
  if (!broadcasts_to(in.shape, out_shape)) fail(&p, "the input does not broadcast to the output");
  View out{in.buffer, std::move(out_shape), {}, in.offset};
  size_t lead = out.shape.size() - in.shape.size();
  out.strides.assign(lead, SymExpr());
  for (size_t k = 0; k < in.shape.size(); ++k)
    out.strides.push_back(is_one(in.shape[k]) ? SymExpr() : in.strides[k]);
  return out;
}

// Reshape, Flatten, Squeeze and Unsqueeze. A contiguous view takes the row-major
// strides of its new shape; any view may split its axes (split_axes): the
// run of axes cut from one keeps its stride at the innermost and steps by
// the extents inside it further out.
View Lowering::reshape(const Node& p, const View& in, std::vector<SymExpr> out_shape) const {
  View out{in.buffer, std::move(out_shape), {}, in.offset};
  if (stepped_strides(in) == stepped_strides(View{-1, in.shape, row_major(in.shape), SymExpr()})) {
    out.strides = row_major(out.shape);
    return out;
  }
  std::optional<std::vector<int>> from = split_axes(in.shape, out.shape);
  if (!from) fail(&p, "merges axes of a strided view (the input is not contiguous)");
  out.strides.assign(out.shape.size(), SymExpr());
  int run = -1;    // the input axis the axis after this one was cut from
  SymExpr inner;   // that axis's stride times its extent
  for (size_t j = out.shape.size(); j-- > 0;) {
    int k = (*from)[j];
    if (k < 0) continue;
    out.strides[j] = k != run ? in.strides[static_cast<size_t>(k)] : inner;
    inner = out.strides[j] * out.shape[j];
    run = k;
  }
  return out;
}

// Where a slice starts along an axis of extent d, clamped as ONNX does.
SymExpr Lowering::slice_start(const SymExpr& d, int64_t start, int64_t step) {
  if (d.is_constant()) {
    int64_t n = d.constant_value();
    int64_t s = start < 0 ? start + n : start;
    return c(step > 0 ? std::clamp<int64_t>(s, 0, n) : std::clamp<int64_t>(s, 0, n - 1));
  }
  // A symbolic extent: bounds are taken to be in range, except the sentinels.
  if (start >= kSliceSentinel) return step > 0 ? d : d - c(1);
  if (start <= -kSliceSentinel) return c(0);
  return start < 0 ? d + c(start) : c(start);
}

std::vector<int64_t> Lowering::constant_ints(const Node& p, size_t input) {
  const Value* v = p.input(input);
  const Tensor* t = v == nullptr ? nullptr : constant_of(v);
  if (t == nullptr) fail(&p, "input " + std::to_string(input) + " is not a constant");
  return t->to_i64_vector();
}

View Lowering::slice(const Node& p, const View& in, std::vector<SymExpr> out_shape) {
  size_t rank = in.shape.size();
  std::vector<int64_t> axes, starts, steps;
  Dims tcc_starts;  // tcc::Slice's, normalized and possibly symbolic
  if (p.domain() == kTccDomain) {
    axes = p.get_ints("axes");
    tcc_starts = parse_shape_attr(p, "starts");
    steps = p.get_ints("steps");
  } else if (p.opset() < 10) {
    axes = p.get_ints("axes");
    starts = p.get_ints("starts");
  } else {
    starts = constant_ints(p, 1);
    if (p.has_input(3)) axes = constant_ints(p, 3);
    if (p.has_input(4)) steps = constant_ints(p, 4);
  }
  size_t n = p.domain() == kTccDomain ? tcc_starts.size() : starts.size();
  if (axes.empty())
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(n, 1);
  if (axes.size() != n || steps.size() != n) fail(&p, "starts, axes and steps differ in length");
  View out{in.buffer, std::move(out_shape), in.strides, in.offset};
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(rank) : axes[i];
    if (a < 0 || a >= static_cast<int64_t>(rank)) fail(&p, "axis " + std::to_string(axes[i]) + " is out of range");
    SymExpr start = p.domain() == kTccDomain ? tcc_starts[i].expr() : slice_start(in.shape[a], starts[i], steps[i]);
    out.offset = out.offset + start * in.strides[a];
    out.strides[a] = in.strides[a] * c(steps[i]);
  }
  return out;
}

bool Lowering::reads_reduced_axes(const kir::Index& ix) const {
  size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
  for (size_t d = outer; d < ix.strides.size(); ++d)
    if (ix.strides[d] != SymExpr()) return true;
  return false;
}

int Lowering::emit(Instr in) {
  if (k_.kind == kir::Kind::Reduction) {
    switch (in.op) {
      // A guarded load is an element value when its guard is; a store along the reduced axes (a value
      // constant along the row, broadcast over it) writes every element of the row.
      case Op::Load:
      case Op::Store:
        in.row = !reads_reduced_axes(in.index) &&
                 std::all_of(in.args.begin(), in.args.end(), [&](int a) { return k_.body[a].row; });
        break;
      case Op::Coord: in.row = in.axis < static_cast<int>(k_.domain.size()) - k_.reduce_axes; break;
      case Op::Const:
      case Op::SizeValue:
      case Op::RandomOffset:
      case Op::ReduceSum:
      case Op::ReduceMax:
      case Op::ReduceMin:
      case Op::ReduceProd: in.row = true; break;
      // A running sum differs along the row even where its operand does not
      // (a load whose stride along the row is 0, as it is when a dim is 0).
      case Op::ScanSum: in.row = false; break;
      default:
        in.row = std::all_of(in.args.begin(), in.args.end(), [&](int a) { return k_.body[a].row; });
    }
  }
  // Loads and constants are pure: one instruction per distinct one.
  std::string key;
  if (in.op == Op::Load || in.op == Op::Const || in.op == Op::SizeValue || in.op == Op::Coord ||
      in.op == Op::RandomOffset) {
    key = std::to_string(static_cast<int>(in.op)) + " " + std::string(dtype_name(in.dtype)) + " " +
          std::to_string(in.buffer) + " " + in.index.offset.str() + " " + in.size.str() + " " +
          std::to_string(in.axis) + " " + std::to_string(in.dynamic) + " " + in.dynamic_stride.str() + " ";
    for (const SymExpr& s : in.index.strides) key += s.str() + ",";
    for (int a : in.args) key += "%" + std::to_string(a);
    char bits[sizeof(double)];
    std::memcpy(bits, &in.value, sizeof bits);
    key.append(bits, sizeof bits);
    if (auto it = leaves_.find(key); it != leaves_.end()) return it->second;
  }
  k_.body.push_back(std::move(in));
  int id = static_cast<int>(k_.body.size()) - 1;
  if (!key.empty()) leaves_.emplace(key, id);
  return id;
}

int Lowering::emit(Op op, DType dtype, std::vector<int> args) {
  Instr in;
  in.op = op;
  in.dtype = dtype;
  in.args = std::move(args);
  return emit(std::move(in));
}

int Lowering::constant(DType dtype, double value) {
  Instr in;
  in.op = Op::Const;
  in.dtype = dtype;
  in.value = value;
  return emit(std::move(in));
}

// The point's coordinate along domain axis `axis`, as an i64.
int Lowering::coordinate(int axis) {
  Instr in;
  in.op = Op::Coord;
  in.dtype = DType::I64;
  in.axis = axis;
  return emit(std::move(in));
}

int Lowering::frame_coordinate(int frame, int axis) {
  int at = coordinate(axis);
  const Frame& f = frames_.at(frame);
  if (f.origin.empty() || f.origin[axis] == SymExpr()) return at;
  return emit(Op::Sub, DType::I64, {at, size_value(DType::I64, f.origin[axis])});
}

int Lowering::size_value(DType dtype, const SymExpr& size) {
  if (size.is_constant()) return constant(dtype, static_cast<double>(size.constant_value()));
  Instr in;
  in.op = Op::SizeValue;
  in.dtype = dtype;
  in.size = size;
  return emit(std::move(in));
}

// The frame a value naturally lines up with: a keepdims=0 reduction's result
// and what is computed from it alone use the kept axes (frame 1), everything
// else the main frame (0); -1 for values that take their consumer's frame.
// A value with more axes than the kept frame, such as x - max(x) with
// keepdims=0, broadcasts the result back over the reduced input: frame 0.
int Lowering::natural_frame(const Value* v) {
  if (auto it = natural_.find(v); it != natural_.end()) return it->second;
  int frame = -1;
  const Node* p = v->producer();
  if (p != nullptr && !is_body_input(v) && constant_of(v) == nullptr && !is_movement(*p)) {
    if (is_reduction(*p) && !axes_.empty()) {
      frame = p->get_int("keepdims", 1) != 0 ? 0 : 1;
    } else if (kernel_role(*p) == KernelRole::Contraction || kernel_role(*p) == KernelRole::Convolution) {
      frame = 0;
    } else {
      for (const Value* in : p->inputs()) {
        int f = in == nullptr ? -1 : natural_frame(in);
        if (f == 0 || frame < 0) frame = f == 0 ? 0 : std::max(frame, f);
      }
      if (frame == 1 && shape_of(v).size() > frames_[1].shape.size()) frame = 0;
    }
  }
  natural_.emplace(v, frame);
  return frame;
}

int Lowering::lower(const Value* v, int frame) {
  auto key = std::make_pair(v, frame);
  if (auto it = values_.find(key); it != values_.end()) return it->second;
  int id = lower_uncached(v, frame);
  values_.emplace(key, id);
  return id;
}

int Lowering::lower_uncached(const Value* v, int frame) {
  const Node* p = v->producer();
  if (is_body_input(v) || (p != nullptr && is_movement(*p))) {
    Instr in;
    in.op = Op::Load;
    in.dtype = v->type().dtype();
    View view = view_of(v);
    in.buffer = view.buffer;
    std::vector<int> map = axis_map(v, frame);
    in.index = index_of(view, map);
    const Frame& f = frames_.at(frame);
    for (size_t k = 0; k < map.size() && !f.origin.empty(); ++k)
      if (map[k] >= 0) in.index.offset = in.index.offset - f.origin[map[k]] * view.strides[k];
    if (f.guard >= 0) in.args = {f.guard};
    return emit(std::move(in));
  }
  if (const Tensor* t = constant_of(v)) {
    if (t->numel() == 0) fail(p, "constant '" + v->name() + "' is empty");
    double first = t->get_f64(0);
    for (int64_t i = 1; i < t->numel(); ++i)
      if (t->get_f64(i) != first)
        fail(p, "constant '" + v->name() + "' is not one repeated value; kernels take tensors only as buffers");
    return constant(v->type().dtype(), first);
  }
  TCC_CHECK(p != nullptr) << "body value '" << v->name() << "' of " << fusion_.name() << " has no definition";
  if (is_reduction(*p)) return lower_reduction(*p, frame);
  if (kernel_role(*p) == KernelRole::Indexed) {
    if (p->op_type() == "Concat") return lower_concat(*p, frame);
    if (p->op_type() == "Pad") return lower_pad(*p, frame);
    if (p->op_type() == "Gather") return lower_gather(*p, frame);
    if (p->op_type() == "GatherElements") return lower_gather_elements(*p, frame);
    if (p->op_type() == "GatherND") return lower_gather_nd(*p, frame);
    lower_pool(*p, frame);
    return values_.at({v, frame});
  }
  if (kernel_role(*p) == KernelRole::Pointwise) return lower_pointwise(*p, frame);
  fail(p, "is not an op this fusion kind computes");
}

int Lowering::lower_reduction(const Node& p, int frame) {
  if (axes_.empty()) return lower(p.input(0), frame);  // noop_with_empty_axes: the identity
  if (reduction_axes(p) != axes_) fail(&p, "reduces other axes than the kernel");
  int natural = natural_frame(p.output(0));
  if (frame != natural && axis_map(p.output(0), frame) != axis_map(p.output(0), natural))
    fail(&p, "its result is used along other axes than the ones it keeps");
  if (auto it = reductions_.find(&p); it != reductions_.end()) return it->second;
  DType dtype = p.output(0)->type().dtype();
  int x = lower(p.input(0), 0);
  static const std::map<std::string_view, Op> kOps = {{"ReduceSum", Op::ReduceSum}, {"ReduceMean", Op::ReduceSum},
                                                      {"ReduceMax", Op::ReduceMax}, {"ReduceMin", Op::ReduceMin},
                                                      {"ReduceProd", Op::ReduceProd}};
  auto op = kOps.find(p.op_type());
  if (op == kOps.end()) fail(&p, "is not a reduction the lowering knows");
  int r = emit(op->second, dtype, {x});
  if (p.op_type() == "ReduceMean") r = emit(Op::Div, dtype, {r, size_value(dtype, row_length(k_))});
  reductions_.emplace(&p, r);
  return r;
}

// A pointwise node's value at the point: its OpDef's scalar expression over
// its inputs' values, built into the kernel's body.
int Lowering::lower_pointwise(const Node& p, int frame) {
  const OpDef* def = OpRegistry::get().lookup(p);
  TCC_CHECK(def != nullptr && def->pointwise) << "node '" << p.name() << "' has the Pointwise role but no expression";
  // Inputs in order, then the expression: the body's order must not depend
  // on the order C++ evaluates function arguments in.
  std::vector<int> in;
  for (const Value* v : p.inputs()) in.push_back(v == nullptr ? -1 : lower(v, frame));
  struct Builder : ScalarBuilder {
    Builder(Lowering& l, int frame) : l_(l), frame_(frame) {}
    int op(ScalarOp op, DType dtype, std::vector<int> args) override {
      return l_.emit(kir::kernel_op(op), dtype, std::move(args));
    }
    int constant(DType dtype, double value) override { return l_.constant(dtype, value); }
    int coordinate(const Node& n, int axis) override {
      int at = l_.axis_map(n.output(0), frame_).at(static_cast<size_t>(axis));
      return at >= 0 ? l_.frame_coordinate(frame_, at) : l_.constant(DType::I64, 0);
    }
    int size(DType dtype, const SymExpr& size) override { return l_.size_value(dtype, size); }
    int random_offset() override { return l_.emit(Op::RandomOffset, DType::U64, {}); }
    Lowering& l_;
    int frame_;
  } builder(*this, frame);
  return def->pointwise(p, builder, in);
}

void Lowering::store_output(const Value* v, int buffer) {
  int frame = std::max(natural_frame(v), 0);
  Instr st;
  st.op = Op::Store;
  st.dtype = v->type().dtype();
  st.args = {lower(v, frame)};
  st.buffer = buffer;
  st.index = index_of(contiguous(buffer, k_.buffers[buffer].shape), axis_map(v, frame));
  emit(std::move(st));
}

void Lowering::collect_size_params() {
  std::set<std::string> names;
  auto add = [&](const SymExpr& e) {
    for (const std::string& s : e.symbols()) names.insert(s);
  };
  for (const SymExpr& d : k_.domain) add(d);
  for (const Instr& in : k_.body) {
    for (const SymExpr& s : in.index.strides) add(s);
    add(in.index.offset);
    add(in.size);
  }
  if (k_.gemm)
    for (const SymExpr* e : {&k_.gemm->batch, &k_.gemm->m, &k_.gemm->n, &k_.gemm->k, &k_.gemm->lda, &k_.gemm->ldb,
                             &k_.gemm->ldd, &k_.gemm->stride_a, &k_.gemm->stride_b, &k_.gemm->stride_d})
      add(*e);
  if (const auto& a = k_.attention) {
    for (const SymExpr* e : {&a->batch, &a->q_len, &a->kv_len}) add(*e);
    for (const auto* v : {&a->q_strides, &a->k_strides, &a->v_strides})
      for (const SymExpr& e : *v) add(e);
    for (const SymExpr* e : {&a->q_offset, &a->k_offset, &a->v_offset}) add(*e);
    for (const SymExpr& e : a->mask_strides) add(e);
  }
  if (k_.recurrence) {
    add(k_.recurrence->seq);
    add(k_.recurrence->batch);
  }
  if (k_.nms) add(k_.nms->boxes);
  if (k_.conv) {
    for (const SymExpr* e : {&k_.conv->n, &k_.conv->c, &k_.conv->k}) add(*e);
    for (const SymExpr& e : k_.conv->in) add(e);
    for (const SymExpr& e : k_.conv->out) add(e);
  }
  k_.size_params.assign(names.begin(), names.end());
}

}  // namespace lowering

kir::Kernel lower_fusion(const Node& fusion, const std::string& kernel_name, Precision precision) {
  return lowering::Lowering(fusion, kernel_name, precision).run();
}

}  // namespace tcc
