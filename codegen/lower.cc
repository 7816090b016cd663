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

#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

using kir::Instr;
using kir::Op;

SymExpr c(int64_t v) { return SymExpr::constant(v); }
bool is_one(const SymExpr& d) { return d.is_constant() && d.constant_value() == 1; }

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

// An affine view of a buffer: element (i_0, ..., i_r-1) of a value of `shape`
// lies at offset + sum_k i_k * strides[k] in buffer `buffer`.
struct View {
  int buffer = -1;
  std::vector<SymExpr> shape, strides;
  SymExpr offset;
};

// A value of rank r lines up with the last r axes of the frame's shape; frame
// axis a is domain axis to_domain[a] (-1: an axis of extent 1 the domain lacks).
struct Frame {
  std::vector<SymExpr> shape;
  std::vector<int> to_domain;
};

const Tensor* constant_of(const Value* v) {
  if (v->is_initializer() && !v->is_graph_input()) return &v->initializer();
  const Node* p = v->producer();
  if (p != nullptr && p->op_type() == "Constant" && p->domain().empty()) return p->get_tensor("value");
  return nullptr;
}

bool is_reduction(const Node& n) { return kernel_role(n) == KernelRole::Reduction; }
bool is_movement(const Node& n) { return kernel_role(n) == KernelRole::Movement; }

class Lowering {
 public:
  Lowering(const Node& fusion, const std::string& name) : fusion_(fusion), body_(fusion_body(fusion)) {
    k_.name = name;
  }

  kir::Kernel run() {
    if (std::string why = verify_fusion(fusion_); !why.empty()) throw InternalError(why);
    for (const auto& n : body_.nodes()) k_.nodes.push_back(n->name().empty() ? n->op_type() : n->name());
    for (size_t i = 0; i < fusion_.num_inputs(); ++i) add_buffer(fusion_.input(i), false);
    for (size_t i = 0; i < fusion_.num_outputs(); ++i) add_buffer(fusion_.output(i), true);
    const Node* scatter = nullptr;  // tcc::ScatterAdd: iterates its updates, stores by index
    for (const auto& n : body_.nodes())
      if (n->domain() == kTccDomain && n->op_type() == "ScatterAdd") scatter = n.get();
    switch (fusion_kind(fusion_)) {
      case FusionKind::Pointwise:
      case FusionKind::Single:
        if (scatter) setup_scatter_add(*scatter);
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
    if (scatter) lower_scatter_add(*scatter);
    else
      for (size_t j = 0; j < body_.outputs().size(); ++j)
        store_output(body_.outputs()[j], static_cast<int>(fusion_.num_inputs() + j));
    collect_size_params();
    return std::move(k_);
  }

 private:
  [[noreturn]] void fail(const Node* body_node, const std::string& msg) const {
    std::string where = "lowering fusion " + who(fusion_) + ": ";
    if (body_node != nullptr) where += "body node " + who(*body_node) + ": ";
    throw InternalError(where + msg);
  }

  std::vector<SymExpr> shape_of(const Value* v) const {
    const Type& t = v->type();
    if (!t.is_tensor() || !t.fully_shaped()) fail(v->producer(), "value '" + v->name() + "' has type " + t.str() + ", not a fully shaped tensor");
    std::vector<SymExpr> shape;
    for (const Dim& d : t.shape()) shape.push_back(d.expr());
    return shape;
  }

  void add_buffer(const Value* v, bool output) {
    k_.buffers.push_back(kir::Buffer{v->name(), v->type().dtype(), shape_of(v), output});
  }

  int input_buffer(const Value* v) const {
    const auto& ins = body_.inputs();
    auto it = std::find(ins.begin(), ins.end(), v);
    TCC_CHECK(it != ins.end()) << "'" << v->name() << "' is not an input of the body of " << fusion_.name();
    return static_cast<int>(it - ins.begin());
  }

  bool is_body_input(const Value* v) const { return v->is_graph_input() && v->graph() == &body_; }

  // ---- domains ----------------------------------------------------------------

  static std::vector<int> iota(size_t n) {
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }

  // Whether `small` broadcasts to `big` (right-aligned, each dim equal or 1).
  static bool broadcasts_to(const std::vector<SymExpr>& small, const std::vector<SymExpr>& big) {
    if (small.size() > big.size()) return false;
    size_t lead = big.size() - small.size();
    for (size_t k = 0; k < small.size(); ++k)
      if (!is_one(small[k]) && small[k] != big[lead + k]) return false;
    return true;
  }

  // The domain is the output every other output broadcasts to; smaller outputs
  // store the same element from several points, which is harmless.
  void setup_pointwise() {
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

  // The domain is the updates' shape; the output starts as zeros.
  void setup_scatter_add(const Node& p) {
    if (fusion_.num_outputs() != 1 || body_.outputs().front() != p.output(0))
      fail(&p, "is lowered only as a kernel of its own");
    k_.kind = kir::Kind::Pointwise;
    k_.domain = shape_of(p.input(1));
    frames_.push_back(Frame{k_.domain, iota(k_.domain.size())});
    k_.zero_outputs = true;
  }

  // Each update adds into the output at its own coordinates, the axis's
  // replaced by its index (negative: from the end). An index outside the axis
  // adds nothing (the interpreter rejects it).
  void lower_scatter_add(const Node& p) {
    std::vector<SymExpr> out_shape = shape_of(p.output(0));
    std::vector<SymExpr> strides = row_major(out_shape);
    auto rank = static_cast<int64_t>(out_shape.size());
    int64_t axis = p.get_int("axis", 0);
    if (axis < 0) axis += rank;
    auto [wrapped, inside] =
        axis_index(lower(p.input(0), 0), p.input(0)->type().dtype(), out_shape.at(static_cast<size_t>(axis)));
    int value = lower(p.input(1), 0);
    Instr st;
    st.op = Op::Store;
    st.buffer = static_cast<int>(fusion_.num_inputs());
    st.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), SymExpr()};
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis) st.index.strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d)];
    st.dynamic = wrapped;
    st.dynamic_stride = strides[static_cast<size_t>(axis)];
    st.accumulate = true;
    st.args = {value, inside};
    emit(std::move(st));
  }

  void setup_reduction() {
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

  // ---- axis maps and indices --------------------------------------------------

  // For each axis of v: the domain axis it runs along in `frame`, or -1 for an
  // axis of extent 1 (its coordinate is always 0).
  std::vector<int> axis_map(const Value* v, int frame) const {
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

  kir::Index index_of(const View& view, const std::vector<int>& map) const {
    kir::Index ix{std::vector<SymExpr>(k_.domain.size()), view.offset};
    for (size_t k = 0; k < map.size(); ++k)
      if (map[k] >= 0) ix.strides[map[k]] = ix.strides[map[k]] + view.strides[k];
    return ix;
  }

  // ---- views of body inputs ---------------------------------------------------

  View contiguous(int buffer, std::vector<SymExpr> shape) const {
    std::vector<SymExpr> strides = row_major(shape);
    return View{buffer, std::move(shape), std::move(strides), SymExpr()};
  }

  // Strides with every axis of extent 1 zeroed: such an axis is never stepped,
  // so views that differ only there address the same elements.
  static std::vector<SymExpr> stepped_strides(const View& v) {
    std::vector<SymExpr> s = v.strides;
    for (size_t k = 0; k < s.size(); ++k)
      if (is_one(v.shape[k])) s[k] = SymExpr();
    return s;
  }

  View view_of(const Value* v) {
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

  View transpose(const Node& p, const View& in, std::vector<SymExpr> out_shape) const {
    std::vector<int64_t> perm = p.get_ints("perm");
    if (perm.empty())
      for (size_t i = in.shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != in.shape.size()) fail(&p, "perm does not match the input rank");
    View out{in.buffer, std::move(out_shape), {}, in.offset};
    for (int64_t a : perm) out.strides.push_back(in.strides.at(static_cast<size_t>(a)));
    return out;
  }

  View expand(const Node& p, const View& in, std::vector<SymExpr> out_shape) const {
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
  View reshape(const Node& p, const View& in, std::vector<SymExpr> out_shape) const {
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
  static SymExpr slice_start(const SymExpr& d, int64_t start, int64_t step) {
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

  std::vector<int64_t> constant_ints(const Node& p, size_t input) {
    const Value* v = p.input(input);
    const Tensor* t = v == nullptr ? nullptr : constant_of(v);
    if (t == nullptr) fail(&p, "input " + std::to_string(input) + " is not a constant");
    return t->to_i64_vector();
  }

  View slice(const Node& p, const View& in, std::vector<SymExpr> out_shape) {
    size_t rank = in.shape.size();
    std::vector<int64_t> axes, starts, steps;
    if (p.domain() == kTccDomain) {
      axes = p.get_ints("axes");
      starts = p.get_ints("starts");
      steps = p.get_ints("steps");
    } else if (p.opset() < 10) {
      axes = p.get_ints("axes");
      starts = p.get_ints("starts");
    } else {
      starts = constant_ints(p, 1);
      if (p.has_input(3)) axes = constant_ints(p, 3);
      if (p.has_input(4)) steps = constant_ints(p, 4);
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size()) fail(&p, "starts, axes and steps differ in length");
    View out{in.buffer, std::move(out_shape), in.strides, in.offset};
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(rank) : axes[i];
      if (a < 0 || a >= static_cast<int64_t>(rank)) fail(&p, "axis " + std::to_string(axes[i]) + " is out of range");
      SymExpr start = p.domain() == kTccDomain ? c(starts[i]) : slice_start(in.shape[a], starts[i], steps[i]);
      out.offset = out.offset + start * in.strides[a];
      out.strides[a] = in.strides[a] * c(steps[i]);
    }
    return out;
  }

  // ---- instructions -----------------------------------------------------------

  bool reads_reduced_axes(const kir::Index& ix) const {
    size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
    for (size_t d = outer; d < ix.strides.size(); ++d)
      if (ix.strides[d] != SymExpr()) return true;
    return false;
  }

  int emit(Instr in) {
    if (k_.kind == kir::Kind::Reduction) {
      switch (in.op) {
        case Op::Load: in.row = !reads_reduced_axes(in.index); break;
        case Op::Const:
        case Op::SizeValue:
        case Op::ReduceSum:
        case Op::ReduceMax:
        case Op::ReduceMin:
        case Op::ReduceProd: in.row = true; break;
        default:
          in.row = std::all_of(in.args.begin(), in.args.end(), [&](int a) { return k_.body[a].row; });
      }
    }
    // Loads and constants are pure: one instruction per distinct one.
    std::string key;
    if (in.op == Op::Load || in.op == Op::Const || in.op == Op::SizeValue || in.op == Op::Coord) {
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

  int emit(Op op, DType dtype, std::vector<int> args) {
    Instr in;
    in.op = op;
    in.dtype = dtype;
    in.args = std::move(args);
    return emit(std::move(in));
  }

  int constant(DType dtype, double value) {
    Instr in;
    in.op = Op::Const;
    in.dtype = dtype;
    in.value = value;
    return emit(std::move(in));
  }

  // The point's coordinate along domain axis `axis`, as an i64.
  int coordinate(int axis) {
    Instr in;
    in.op = Op::Coord;
    in.dtype = DType::I64;
    in.axis = axis;
    return emit(std::move(in));
  }

  int size_value(DType dtype, const SymExpr& size) {
    if (size.is_constant()) return constant(dtype, static_cast<double>(size.constant_value()));
    Instr in;
    in.op = Op::SizeValue;
    in.dtype = dtype;
    in.size = size;
    return emit(std::move(in));
  }

  // ---- values -----------------------------------------------------------------

  // The frame a value naturally lines up with: a keepdims=0 reduction's result
  // and what is computed from it alone use the kept axes (frame 1), everything
  // else the main frame (0); -1 for values that take their consumer's frame.
  int natural_frame(const Value* v) {
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
      }
    }
    natural_.emplace(v, frame);
    return frame;
  }

  int lower(const Value* v, int frame) {
    auto key = std::make_pair(v, frame);
    if (auto it = values_.find(key); it != values_.end()) return it->second;
    int id = lower_uncached(v, frame);
    values_.emplace(key, id);
    return id;
  }

  int lower_uncached(const Value* v, int frame) {
    const Node* p = v->producer();
    if (is_body_input(v) || (p != nullptr && is_movement(*p))) {
      Instr in;
      in.op = Op::Load;
      in.dtype = v->type().dtype();
      View view = view_of(v);
      in.buffer = view.buffer;
      in.index = index_of(view, axis_map(v, frame));
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

  int lower_reduction(const Node& p, int frame) {
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

  // Concat along `axis`: at each point, input i where the coordinate falls in
  // its range [start_i, start_i + size_i), read at coordinate - start_i. Each
  // input's load is guarded by its range, so no address outside it is read;
  // a chain of Wheres picks the one that holds.
  int lower_concat(const Node& p, int frame) {
    if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a copy kernel of its own");
    auto rank = static_cast<int64_t>(shape_of(p.output(0)).size());
    int64_t axis = p.get_int("axis", 0);
    if (axis < 0) axis += rank;
    DType dt = p.output(0)->type().dtype();
    int at = coordinate(frames_[0].to_domain.at(static_cast<size_t>(axis)));
    int result = -1;
    SymExpr start = c(0);
    for (const Value* x : p.inputs()) {
      View view = view_of(x);
      SymExpr size = view.shape.at(static_cast<size_t>(axis));
      int from = emit(Op::GreaterOrEqual, DType::Bool, {at, size_value(DType::I64, start)});
      int below = emit(Op::Less, DType::Bool, {at, size_value(DType::I64, start + size)});
      int inside = emit(Op::And, DType::Bool, {from, below});
      Instr load;
      load.op = Op::Load;
      load.dtype = dt;
      load.buffer = view.buffer;
      load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), view.offset - start * view.strides[axis]};
      for (size_t d = 0; d < view.strides.size(); ++d) load.index.strides[frames_[0].to_domain[d]] = view.strides[d];
      load.args = {inside};
      int value = emit(std::move(load));
      result = result < 0 ? value : emit(Op::Where, dt, {inside, value, result});
      start = start + size;
    }
    return result;
  }

  // Pad, (begin, end) per axis; negative pads crop. Constant mode: at each
  // point, the input where every padded axis's coordinate c has begin <= c <
  // begin + size, read at c - begin, else the fill; the load is guarded by that
  // range, so no address outside the input is read. Edge, reflect and wrap
  // read every point from a source coordinate per padded axis (clamped,
  // mirrored without repeating the edge, or taken modulo the size, as the
  // interpreter's pad_source), summed into the load's computed index; an empty
  // padded axis reads nothing (the interpreter refuses it).
  int lower_pad(const Node& p, int frame) {
    if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a copy kernel of its own");
    View view = view_of(p.input(0));
    auto rank = static_cast<int64_t>(view.shape.size());
    std::vector<int64_t> axes(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), int64_t{0});
    if (p.has_input(3)) axes = constant_of(p.input(3))->to_i64_vector();
    std::vector<int64_t> pads = constant_of(p.input(1))->to_i64_vector();
    if (pads.size() != 2 * axes.size()) fail(&p, "has " + std::to_string(pads.size()) + " pads for " +
                                                 std::to_string(axes.size()) + " axes");
    std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (a < 0 || a >= rank) fail(&p, "pads axis " + std::to_string(axes[i]) + " outside its rank");
      begin[static_cast<size_t>(a)] = pads[i];
      end[static_cast<size_t>(a)] = pads[i + axes.size()];
    }
    const std::string mode = p.get_string("mode", "constant");
    DType dt = p.output(0)->type().dtype();
    const std::vector<int>& to_domain = frames_[0].to_domain;
    Instr load;
    load.op = Op::Load;
    load.dtype = dt;
    load.buffer = view.buffer;
    load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), view.offset};
    int inside = -1, source = -1;
    auto both = [&](int a, int b) { return a < 0 ? b : emit(Op::And, DType::Bool, {a, b}); };
    for (size_t d = 0; d < begin.size(); ++d) {
      if (begin[d] == 0 && end[d] == 0) {
        load.index.strides[to_domain[d]] = view.strides[d];
        continue;
      }
      int at = emit(Op::Sub, DType::I64,
                    {coordinate(to_domain[d]), constant(DType::I64, static_cast<double>(begin[d]))});
      int size = size_value(DType::I64, view.shape[d]), zero = constant(DType::I64, 0);
      if (mode == "constant") {
        load.index.strides[to_domain[d]] = view.strides[d];
        load.index.offset = load.index.offset - c(begin[d]) * view.strides[d];
        inside = both(inside, emit(Op::And, DType::Bool, {emit(Op::GreaterOrEqual, DType::Bool, {at, zero}),
                                                          emit(Op::Less, DType::Bool, {at, size})}));
        continue;
      }
      int from = at;
      if (mode == "edge") {
        int last = emit(Op::Sub, DType::I64, {size, constant(DType::I64, 1)});
        from = emit(Op::Min, DType::I64, {emit(Op::Max, DType::I64, {at, zero}), last});
      } else if (mode == "wrap") {
        from = emit(Op::Mod, DType::I64, {at, size});
      } else {
        int period = emit(Op::Mul, DType::I64, {emit(Op::Sub, DType::I64, {size, constant(DType::I64, 1)}),
                                                constant(DType::I64, 2)});
        int m = emit(Op::Mod, DType::I64, {at, period});
        from = emit(Op::Where, DType::I64, {emit(Op::Less, DType::Bool, {m, size}), m,
                                            emit(Op::Sub, DType::I64, {period, m})});
      }
      int term = emit(Op::Mul, DType::I64, {from, size_value(DType::I64, view.strides[d])});
      source = source < 0 ? term : emit(Op::Add, DType::I64, {source, term});
      inside = both(inside, emit(Op::Greater, DType::Bool, {size, zero}));
    }
    if (source >= 0) {
      load.dynamic = source;
      load.dynamic_stride = c(1);
    }
    if (inside < 0) return emit(std::move(load));
    load.args = {inside};
    int value = emit(std::move(load));
    if (mode != "constant") return value;
    const Tensor* fill = p.has_input(2) ? constant_of(p.input(2)) : nullptr;
    double fill_value = fill != nullptr && fill->numel() > 0 ? fill->get_f64(0) : 0.0;
    return emit(Op::Where, dt, {inside, value, constant(dt, fill_value)});
  }

  // An index `index` (an instruction of integer `dtype`) into an axis of
  // `extent`, a negative one counted from the end: {the i64 position, whether
  // it falls inside the axis}.
  std::pair<int, int> axis_index(int index, DType dtype, const SymExpr& extent) {
    if (dtype != DType::I64) index = emit(Op::Cast, DType::I64, {index});
    int zero = constant(DType::I64, 0), end = size_value(DType::I64, extent);
    int wrapped = emit(Op::Where, DType::I64,
                       {emit(Op::Less, DType::Bool, {index, zero}), emit(Op::Add, DType::I64, {index, end}), index});
    int inside = emit(Op::And, DType::Bool, {emit(Op::GreaterOrEqual, DType::Bool, {wrapped, zero}),
                                             emit(Op::Less, DType::Bool, {wrapped, end})});
    return {wrapped, inside};
  }

  // Gather along `axis`: output point (outer..., i..., inner...) reads data at
  // (outer..., indices[i...], inner...). A negative index counts from the end;
  // one outside the axis reads nothing and gives 0 (the interpreter rejects it).
  int lower_gather(const Node& p, int frame) {
    if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a copy kernel of its own");
    View data = view_of(p.input(0)), indices = view_of(p.input(1));
    auto rank = static_cast<int64_t>(data.shape.size());
    int64_t axis = p.get_int("axis", 0);
    if (axis < 0) axis += rank;
    size_t q = indices.shape.size();
    const std::vector<int>& to_domain = frames_[0].to_domain;
    Instr at;
    at.op = Op::Load;
    at.dtype = p.input(1)->type().dtype();
    at.buffer = indices.buffer;
    at.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), indices.offset};
    for (size_t d = 0; d < q; ++d) at.index.strides[to_domain[axis + d]] = indices.strides[d];
    auto [wrapped, inside] =
        axis_index(emit(std::move(at)), p.input(1)->type().dtype(), data.shape.at(static_cast<size_t>(axis)));
    Instr load;
    load.op = Op::Load;
    load.dtype = p.output(0)->type().dtype();
    load.buffer = data.buffer;
    load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), data.offset};
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      size_t out_axis = static_cast<size_t>(d < axis ? d : d + static_cast<int64_t>(q) - 1);
      load.index.strides[to_domain[out_axis]] = data.strides[d];
    }
    load.dynamic = wrapped;
    load.dynamic_stride = data.strides[axis];
    load.args = {inside};
    return emit(std::move(load));
  }

  // A load of buffer `view` at the output point, its axes lined up with the
  // output's axes `first`, `first` + 1, ... (those of extent 1 the domain
  // lacks contribute nothing), plus `offset`.
  Instr aligned_load(const View& view, DType dtype, const std::vector<size_t>& view_axes, size_t first,
                     const SymExpr& offset) {
    const std::vector<int>& to_domain = frames_[0].to_domain;
    Instr load;
    load.op = Op::Load;
    load.dtype = dtype;
    load.buffer = view.buffer;
    load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), view.offset + offset};
    for (size_t i = 0; i < view_axes.size(); ++i)
      if (int d = to_domain[first + i]; d >= 0) load.index.strides[d] = view.strides[view_axes[i]];
    return load;
  }

  // GatherElements along `axis`: output point i reads data at i with its
  // coordinate along the axis replaced by indices[i] (negative counts from the
  // end; outside the axis reads nothing and gives 0).
  int lower_gather_elements(const Node& p, int frame) {
    if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a copy kernel of its own");
    View data = view_of(p.input(0)), indices = view_of(p.input(1));
    auto rank = static_cast<int64_t>(data.shape.size());
    int64_t axis = p.get_int("axis", 0);
    if (axis < 0) axis += rank;
    std::vector<size_t> all(static_cast<size_t>(rank)), others;
    std::iota(all.begin(), all.end(), size_t{0});
    DType index_type = p.input(1)->type().dtype();
    auto [wrapped, inside] = axis_index(emit(aligned_load(indices, index_type, all, 0, SymExpr::constant(0))),
                                        index_type, data.shape.at(static_cast<size_t>(axis)));
    Instr load = aligned_load(data, p.output(0)->type().dtype(), all, 0, SymExpr::constant(0));
    if (int d = frames_[0].to_domain[static_cast<size_t>(axis)]; d >= 0) load.index.strides[d] = SymExpr();
    load.dynamic = wrapped;
    load.dynamic_stride = data.strides[axis];
    load.args = {inside};
    return emit(std::move(load));
  }

  // GatherND with batch_dims b and index tuples of r entries: output point
  // (batch..., i..., t...) reads data at (batch..., indices[batch..., i..., 0 .. r-1], t...),
  // each entry checked against its axis (negative counts from the end; a tuple
  // with an entry outside reads nothing and gives 0).
  int lower_gather_nd(const Node& p, int frame) {
    if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a copy kernel of its own");
    View data = view_of(p.input(0)), indices = view_of(p.input(1));
    size_t b = static_cast<size_t>(p.get_int("batch_dims", 0)), q = indices.shape.size();
    const SymExpr& tuple = indices.shape.back();
    if (!tuple.is_constant()) fail(&p, "index tuples of a symbolic length");
    auto r = static_cast<size_t>(tuple.constant_value());
    std::vector<size_t> leading(q - 1), batch(b), trailing;
    std::iota(leading.begin(), leading.end(), size_t{0});
    std::iota(batch.begin(), batch.end(), size_t{0});
    for (size_t d = b + r; d < data.shape.size(); ++d) trailing.push_back(d);
    DType index_type = p.input(1)->type().dtype();
    int offset = -1, inside = -1;
    for (size_t j = 0; j < r; ++j) {
      int entry = emit(aligned_load(indices, index_type, leading, 0, indices.strides[q - 1] * SymExpr::constant(
                                                                       static_cast<int64_t>(j))));
      auto [wrapped, in] = axis_index(entry, index_type, data.shape[b + j]);
      int term = emit(Op::Mul, DType::I64, {wrapped, size_value(DType::I64, data.strides[b + j])});
      offset = offset < 0 ? term : emit(Op::Add, DType::I64, {offset, term});
      inside = inside < 0 ? in : emit(Op::And, DType::Bool, {inside, in});
    }
    Instr load = aligned_load(data, p.output(0)->type().dtype(), batch, 0, SymExpr::constant(0));
    Instr rest = aligned_load(data, p.output(0)->type().dtype(), trailing, q - 1, SymExpr::constant(0));
    for (size_t d = 0; d < load.index.strides.size(); ++d)
      if (rest.index.strides[d] != SymExpr()) load.index.strides[d] = rest.index.strides[d];
    if (offset >= 0) {
      load.dynamic = offset;
      load.dynamic_stride = SymExpr::constant(1);
      load.args = {inside};
    }
    return emit(std::move(load));
  }

  // MaxPool and AveragePool, the window unrolled: at output point (n, c, o...),
  // tap r... reads X at o * stride - pad_begin + r * dilation along each
  // spatial dim. Where that position can fall outside the input (known from
  // the static extents, else assumed), the tap's load is guarded by it, so no
  // address outside X is read: MaxPool takes -inf there, AveragePool 0, and
  // AveragePool's divisor counts the taps inside the input (or, with
  // count_include_pad, those before the end padding: ceil_mode windows reach past it).
  // MaxPool's Indices output is the flat position in X of the tap each point took:
  // the first inside tap, then any that is greater or NaN, as the interpreter
  // scans. Records the value of each output in values_.
  void lower_pool(const Node& p, int frame) {
    if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a kernel of its own");
    PoolWindow w;
    if (std::string why = pool_window(p, &w); !why.empty()) fail(&p, why);
    View x = view_of(p.input(0));
    std::vector<SymExpr> out = shape_of(p.output(0));
    const std::vector<int>& to_domain = frames_[0].to_domain;
    size_t ns = w.kernel.size();
    DType dt = p.output(0)->type().dtype();
    bool max = p.op_type() == "MaxPool";
    bool indices = max && p.num_outputs() > 1 && p.output(1) != nullptr;
    std::vector<SymExpr> x_strides = row_major(x.shape);
    int plane = -1;  // the flat position of (n, c, 0...) in X
    if (indices)
      plane = emit(Op::Add, DType::I64,
                   {emit(Op::Mul, DType::I64, {coordinate(to_domain[0]), size_value(DType::I64, x_strides[0])}),
                    emit(Op::Mul, DType::I64, {coordinate(to_domain[1]), size_value(DType::I64, x_strides[1])})});
    constexpr int kNever = -2;  // for `have`: no tap inside yet at any point (-1: at every point)
    int have = kNever, best = -1;
    // Spatial dim d's position at tap offset `shift`, the bool that it is below
    // `bound`, and that it is not negative; -1 where that holds at every point.
    std::map<std::pair<size_t, int64_t>, int> positions;
    auto position = [&](size_t d, int64_t shift) {
      auto [it, fresh] = positions.try_emplace({d, shift}, -1);
      if (fresh) {
        int o = emit(Op::Mul, DType::I64,
                     {coordinate(to_domain[2 + d]), constant(DType::I64, static_cast<double>(w.strides[d]))});
        it->second = emit(Op::Add, DType::I64, {o, constant(DType::I64, static_cast<double>(shift))});
      }
      return it->second;
    };
    auto below = [&](size_t d, int64_t shift, const SymExpr& bound) {
      const SymExpr& extent = out[2 + d];
      if (extent.is_constant() && bound.is_constant() &&
          (extent.constant_value() - 1) * w.strides[d] + shift < bound.constant_value())
        return -1;
      return emit(Op::Less, DType::Bool, {position(d, shift), size_value(DType::I64, bound)});
    };
    auto all = [&](int a, int b) { return a < 0 ? b : b < 0 ? a : emit(Op::And, DType::Bool, {a, b}); };
    int result = -1, counted = -1;
    int64_t always_counted = 0;
    for (const std::vector<int64_t>& tap : all_indices(w.kernel)) {
      Instr load;
      load.op = Op::Load;
      load.dtype = dt;
      load.buffer = x.buffer;
      load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), x.offset};
      load.index.strides[to_domain[0]] = x.strides[0];
      load.index.strides[to_domain[1]] = x.strides[1];
      int inside = -1, in_padding = -1;
      for (size_t d = 0; d < ns; ++d) {
        int64_t shift = tap[d] * w.dilations[d] - w.pads_begin[d];
        load.index.strides[to_domain[2 + d]] = x.strides[2 + d] * c(w.strides[d]);
        load.index.offset = load.index.offset + x.strides[2 + d] * c(shift);
        if (shift < 0)
          inside = all(inside, emit(Op::GreaterOrEqual, DType::Bool, {position(d, shift), constant(DType::I64, 0)}));
        inside = all(inside, below(d, shift, x.shape[2 + d]));
        if (w.count_include_pad) in_padding = all(in_padding, below(d, shift, x.shape[2 + d] + c(w.pads_end[d])));
      }
      if (inside >= 0) load.args = {inside};
      int loaded = emit(std::move(load)), value = loaded;
      if (max && inside >= 0)
        value = emit(Op::Where, dt, {inside, value, constant(dt, -std::numeric_limits<double>::infinity())});
      if (indices) {
        int at = plane;
        for (size_t d = 0; d < ns; ++d)
          at = emit(Op::Add, DType::I64,
                    {at, emit(Op::Mul, DType::I64,
                              {position(d, tap[d] * w.dilations[d] - w.pads_begin[d]),
                               size_value(DType::I64, x_strides[2 + d])})});
        int took = inside;
        if (have != kNever) {
          int better = emit(Op::Or, DType::Bool, {emit(Op::Greater, DType::Bool, {loaded, result}),
                                                  emit(Op::IsNaN, DType::Bool, {loaded})});
          if (have >= 0) better = emit(Op::Or, DType::Bool, {better, emit(Op::Not, DType::Bool, {have})});
          took = all(took, better);
        }
        best = took < 0 ? at : emit(Op::Where, DType::I64, {took, at, best < 0 ? constant(DType::I64, -1) : best});
        have = have == -1 || inside < 0 ? -1 : have == kNever ? inside : emit(Op::Or, DType::Bool, {have, inside});
      }
      result = result < 0 ? value : emit(max ? Op::Max : Op::Add, dt, {result, value});
      int counts = w.count_include_pad ? in_padding : inside;
      if (!max && counts < 0) {
        ++always_counted;
      } else if (!max) {
        int one = emit(Op::Cast, dt, {counts});
        counted = counted < 0 ? one : emit(Op::Add, dt, {counted, one});
      }
    }
    if (indices) values_.emplace(std::make_pair(p.output(1), frame), best);
    if (!max) {
      int divisor = constant(dt, static_cast<double>(always_counted));
      if (counted >= 0) divisor = always_counted == 0 ? counted : emit(Op::Add, dt, {counted, divisor});
      result = emit(Op::Div, dt, {result, divisor});
    }
    values_.emplace(std::make_pair(p.output(0), frame), result);
  }

  // A pointwise node's value at the point: its OpDef's scalar expression over
  // its inputs' values, built into the kernel's body.
  int lower_pointwise(const Node& p, int frame) {
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
        return at >= 0 ? l_.coordinate(at) : l_.constant(DType::I64, 0);
      }
      int size(DType dtype, const SymExpr& size) override { return l_.size_value(dtype, size); }
      Lowering& l_;
      int frame_;
    } builder(*this, frame);
    return def->pointwise(p, builder, in);
  }

  // ---- gemm -------------------------------------------------------------------

  // Batch dims of an operand against the domain's: every one (full) or none
  // (broadcast over the whole batch). A MatMul broadcasting only some, which
  // one strided call cannot do, has no kernel role (strided_batches), so
  // verify_fusion keeps it out of any body lowered here.
  enum class Batch { Full, None };

  static Batch batch_kind(const std::vector<SymExpr>& dims) {
    return std::all_of(dims.begin(), dims.end(), is_one) ? Batch::None : Batch::Full;
  }

  void setup_gemm() {
    k_.kind = kir::Kind::Gemm;
    const Node* mm = nullptr;
    for (const auto& n : body_.nodes())
      if (kernel_role(*n) == KernelRole::Contraction) mm = n.get();
    TCC_CHECK(mm != nullptr) << "verify_fusion passed a gemm body without a contraction";
    const Value* a = mm->input(0);
    const Value* b = mm->input(1);
    std::vector<SymExpr> as = shape_of(a), bs = shape_of(b), out = shape_of(mm->output(0));
    kir::GemmDesc g;
    // An operand is a body input, or a body input read transposed (swaps_last_two_axes).
    auto operand = [&](const Value* v, bool& transposed) {
      const Node* t = v->producer();
      transposed = !is_body_input(v) && t != nullptr && swaps_last_two_axes(*t) && is_body_input(t->input(0));
      if (transposed) return input_buffer(t->input(0));
      if (!is_body_input(v)) fail(mm, "its operands are not body inputs");
      return input_buffer(v);
    };
    g.a = operand(a, g.trans_a);
    g.b = operand(b, g.trans_b);
    SymExpr m, n, kk;
    std::vector<int> out_to_domain;
    if (mm->op_type() == "Gemm") {
      if (as.size() != 2 || bs.size() != 2) fail(mm, "Gemm operands are not matrices");
      g.trans_a = mm->get_int("transA", 0) != 0;
      g.trans_b = mm->get_int("transB", 0) != 0;
      g.alpha = mm->get_float("alpha", 1.0f);
      m = as[g.trans_a ? 1 : 0];
      kk = as[g.trans_a ? 0 : 1];
      n = bs[g.trans_b ? 0 : 1];
      k_.domain = {m, n};
      out_to_domain = {0, 1};
    } else {
      // A 1-D operand is a matrix with one row (A) or one column (B) whose axis the output drops.
      std::vector<SymExpr> a_batch, b_batch;
      if (as.size() >= 2) a_batch.assign(as.begin(), as.end() - 2);
      if (bs.size() >= 2) b_batch.assign(bs.begin(), bs.end() - 2);
      m = as.size() >= 2 ? as[as.size() - 2] : c(1);
      kk = as.back();
      n = bs.size() >= 2 ? bs.back() : c(1);
      size_t batch_rank = out.size() - (as.size() >= 2 ? 1 : 0) - (bs.size() >= 2 ? 1 : 0);
      k_.domain.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(batch_rank));
      out_to_domain = iota(batch_rank);
      if (as.size() >= 2) out_to_domain.push_back(static_cast<int>(batch_rank));
      if (bs.size() >= 2) out_to_domain.push_back(static_cast<int>(batch_rank) + 1);
      k_.domain.push_back(m);
      k_.domain.push_back(n);
      std::vector<SymExpr> domain_batch(k_.domain.begin(), k_.domain.end() - 2);
      Batch ab = batch_kind(a_batch), bb = batch_kind(b_batch);
      SymExpr batch = product(domain_batch, 0, domain_batch.size());
      if (bb == Batch::None && ab == Batch::Full && !g.trans_a) {
        // B is shared by the whole batch: one gemm over every row of A.
        m = batch * m;
      } else {
        g.batch = batch;
        if (!is_one(batch)) {
          g.stride_a = ab == Batch::Full ? m * kk : SymExpr();
          g.stride_b = bb == Batch::Full ? kk * n : SymExpr();
          g.stride_d = m * n;
        }
      }
    }
    g.m = m;
    g.n = n;
    g.k = kk;
    g.lda = g.trans_a ? m : kk;
    g.ldb = g.trans_b ? kk : n;
    g.ldd = n;
    frames_.push_back(Frame{out, out_to_domain});
    int acc = emit(Op::MatMulAcc, mm->output(0)->type().dtype(), {});
    values_.emplace(std::make_pair(mm->output(0), 0), gemm_result(*mm, acc, g));
    describe_epilogue(*mm, g);
    k_.gemm = g;
  }

  // The contraction's own result: Gemm scales by alpha and adds beta * C.
  int gemm_result(const Node& mm, int acc, kir::GemmDesc& g) {
    if (mm.op_type() != "Gemm") return acc;
    DType dt = mm.output(0)->type().dtype();
    int r = acc;
    if (g.alpha != 1) r = emit(Op::Mul, dt, {r, constant(dt, g.alpha)});
    if (!mm.has_input(2)) return r;
    double beta = mm.get_float("beta", 1.0f);
    const Value* cv = mm.input(2);
    if (!is_body_input(cv)) fail(&mm, "C is not a body input");
    int cl = lower(cv, 0);
    if (add_to_gemm(mm, cv, g) == Addend::Bias) {
      if (beta != 1) fail(&mm, "scales a bias C by beta, which cuBLASLt's bias epilogue cannot");
    } else {
      g.beta = beta;
    }
    if (beta != 1) cl = emit(Op::Mul, dt, {cl, constant(dt, beta)});
    return emit(Op::Add, dt, {r, cl});
  }

  enum class Addend { Bias, Residual };

  // Records an addend of the product in g: a residual (C, the output's shape)
  // or a bias along N.
  Addend add_to_gemm(const Node& at, const Value* v, kir::GemmDesc& g) {
    if (!is_body_input(v)) fail(&at, "adds '" + v->name() + "', which is not a body input");
    if (shape_of(v) == frames_[0].shape) {
      if (g.residual >= 0) fail(&at, "adds a second residual");
      g.residual = input_buffer(v);
      g.beta = 1;
      return Addend::Residual;
    }
    std::vector<int> map = axis_map(v, 0);
    int n_axis = static_cast<int>(k_.domain.size()) - 1;
    if (!std::all_of(map.begin(), map.end(), [&](int d) { return d < 0 || d == n_axis; }))
      fail(&at, "adds '" + v->name() + "', which is neither a bias along N nor the output's shape");
    // cuBLASLt reads N bias values: one broadcast along N (a scalar C) would be read past its end.
    if (!is_one(g.n) && std::find(map.begin(), map.end(), n_axis) == map.end())
      fail(&at, "adds '" + v->name() + "', which is broadcast along N; cuBLASLt's bias holds one value per column");
    if (g.bias >= 0) fail(&at, "adds a second bias");
    g.bias = input_buffer(v);
    return Addend::Bias;
  }

  // Checks that the epilogue is what cuBLASLt applies, D = act(AB + C + bias),
  // and fills in bias, residual and activation.
  void describe_epilogue(const Node& mm, kir::GemmDesc& g) {
    walk_epilogue(mm, "cuBLASLt", [&](const Node& u, const Value* v) { add_to_gemm(u, v, g); },
                  [&](const Node& u) {
                    bool tanh = u.get_string("approximate", "none") == "tanh";
                    if (u.op_type() == "Gelu" && !tanh)
                      fail(&u, "is an erf Gelu; cuBLASLt's Gelu is the tanh approximation");
                    if (u.op_type() != "Relu" && u.op_type() != "Gelu") fail(&u, "is not an epilogue cuBLASLt applies");
                    g.activation = u.op_type() == "Relu" ? "relu" : "gelu_tanh";
                  });
  }

  // Walks the epilogue chain from op's result to the body's one output: each
  // step is an Add of the running value and another value (`add`) or an
  // activation (`activate`, which fails for what the library does not apply).
  // The libraries add before they activate, so an Add after the activation is refused.
  template <typename Add, typename Activate>
  void walk_epilogue(const Node& op, const std::string& library, Add add, Activate activate) {
    if (body_.outputs().size() != 1) fail(&op, "a " + library + " body has one output");
    auto users = body_.compute_users();
    const Value* cur = op.output(0);
    bool activated = false;
    while (cur != body_.outputs()[0]) {
      const auto& us = users[cur];
      if (us.size() != 1) fail(cur->producer(), "its result does not feed exactly one epilogue step");
      const Node& u = *us[0].first;
      if (u.op_type() == "Add") {
        if (activated) fail(&u, "adds after the activation; " + library + " adds before it");
        if (shape_of(u.output(0)) != frames_[0].shape) fail(&u, "broadcasts the result to a larger shape");
        add(u, u.input(us[0].second == 0 ? 1 : 0));
      } else {
        if (activated) fail(&u, "is a second activation");
        activate(u);
        activated = true;
      }
      cur = u.output(0);
    }
  }

  // ---- conv -------------------------------------------------------------------

  void setup_conv() {
    k_.kind = kir::Kind::Conv;
    const Node* cv = nullptr;
    for (const auto& n : body_.nodes())
      if (kernel_role(*n) == KernelRole::Convolution) cv = n.get();
    TCC_CHECK(cv != nullptr) << "verify_fusion passed a conv body without a convolution";
    ConvWindow win;
    if (std::string why = conv_window(*cv, &win); !why.empty()) fail(cv, why);
    const Value* x = cv->input(0);
    const Value* w = cv->input(1);
    if (!is_body_input(x) || !is_body_input(w)) fail(cv, "X or W is not a body input");
    std::vector<SymExpr> xs = shape_of(x), out = shape_of(cv->output(0));
    kir::ConvDesc d;
    d.x = input_buffer(x);
    d.w = input_buffer(w);
    d.n = xs[0];
    d.c = xs[1];
    d.k = out[1];
    d.in.assign(xs.begin() + 2, xs.end());
    d.out.assign(out.begin() + 2, out.end());
    d.kernel = win.kernel;
    d.strides = win.strides;
    d.dilations = win.dilations;
    d.pads = win.pads;
    d.groups = win.groups;
    k_.domain = out;
    frames_.push_back(Frame{out, iota(out.size())});
    DType dt = cv->output(0)->type().dtype();
    int result = emit(Op::ConvAcc, dt, {});
    if (cv->has_input(2)) {
      // B has one value per output channel: a load along domain axis 1.
      const Value* b = cv->input(2);
      if (!is_body_input(b)) fail(cv, "B is not a body input");
      d.bias = input_buffer(b);
      Instr in;
      in.op = Op::Load;
      in.dtype = dt;
      in.buffer = d.bias;
      in.index.strides.assign(out.size(), SymExpr());
      in.index.strides[1] = c(1);
      result = emit(Op::Add, dt, {result, emit(std::move(in))});
    }
    values_.emplace(std::make_pair(cv->output(0), 0), result);
    walk_epilogue(*cv, "cuDNN", [&](const Node& u, const Value* v) { add_to_conv(u, v, d); },
                  [&](const Node& u) {
                    if (u.op_type() != "Relu") fail(&u, "is not an epilogue cuDNN applies");
                    d.activation = "relu";
                  });
    k_.conv = d;
  }

  // Records an addend of the convolution in d: a residual of the output's
  // shape, or a bias with one value per output channel.
  void add_to_conv(const Node& at, const Value* v, kir::ConvDesc& d) {
    if (!is_body_input(v)) fail(&at, "adds '" + v->name() + "', which is not a body input");
    std::vector<SymExpr> shape = shape_of(v);
    if (shape == frames_[0].shape) {
      if (d.residual >= 0) fail(&at, "adds a second residual");
      d.residual = input_buffer(v);
      return;
    }
    std::vector<int> map = axis_map(v, 0);
    if (!std::all_of(map.begin(), map.end(), [](int a) { return a < 0 || a == 1; }) ||
        product(shape, 0, shape.size()) != d.k)
      fail(&at, "adds '" + v->name() + "', which is neither a bias per channel nor the output's shape");
    if (d.bias >= 0) fail(&at, "adds a second bias");
    d.bias = input_buffer(v);
  }

  // ---- outputs and sizes ------------------------------------------------------

  void store_output(const Value* v, int buffer) {
    int frame = std::max(natural_frame(v), 0);
    Instr st;
    st.op = Op::Store;
    st.dtype = v->type().dtype();
    st.args = {lower(v, frame)};
    st.buffer = buffer;
    st.index = index_of(contiguous(buffer, k_.buffers[buffer].shape), axis_map(v, frame));
    emit(std::move(st));
  }

  void collect_size_params() {
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
    if (k_.conv) {
      for (const SymExpr* e : {&k_.conv->n, &k_.conv->c, &k_.conv->k}) add(*e);
      for (const SymExpr& e : k_.conv->in) add(e);
      for (const SymExpr& e : k_.conv->out) add(e);
    }
    k_.size_params.assign(names.begin(), names.end());
  }

  const Node& fusion_;
  const Graph& body_;
  kir::Kernel k_;
  std::vector<Frame> frames_;
  std::vector<int64_t> axes_;  // reduction kernels: the reduced axes of the frame-0 shape
  std::map<std::pair<const Value*, int>, int> values_;
  std::unordered_map<const Value*, int> natural_;
  std::unordered_map<const Node*, int> reductions_;
  std::unordered_map<std::string, int> leaves_;
};

}  // namespace

kir::Kernel lower_fusion(const Node& fusion, const std::string& kernel_name) {
  return Lowering(fusion, kernel_name).run();
}

}  // namespace tcc
