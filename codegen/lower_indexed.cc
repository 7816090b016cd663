// Kernels whose loads are guarded by the coordinate or indexed by another
// tensor's values, and whose stores may add atomically (lowering.h).
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "codegen/lowering.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"

namespace tcc::lowering {

// The domain is the updates' shape; the output starts as zeros
// (tcc::ScatterAdd) or as a copy of the data (Kernel::copy_from).
void Lowering::setup_scatter(const Node& p) {
  if (fusion_.num_outputs() != 1 || body_.outputs().front() != p.output(0))
    fail(&p, "is lowered only as a kernel of its own");
  bool zeros = p.domain() == kTccDomain;
  k_.kind = kir::Kind::Pointwise;
  k_.domain = shape_of(p.input(zeros ? 1 : 2));
  frames_.push_back(Frame{k_.domain, iota(k_.domain.size())});
  if (zeros) k_.zero_outputs = true;
  else k_.copy_from = input_buffer(p.input(0));
}

// Each update is stored into the output, combined with the element there as
// the reduction says (ScatterAdd: add; none: replaced): ScatterAdd's and
// ScatterElements' at the update's own coordinates, the axis's replaced by
// its index; ScatterND's at (tuple..., t...) for the update at (i..., t...),
// the tuple indices[i..., 0 .. m-1]. A negative index counts from the end;
// an update with an index outside its axis stores nothing (the interpreter
// rejects it).
void Lowering::lower_scatter(const Node& p) {
  bool zeros = p.domain() == kTccDomain;
  const Value* indices = p.input(zeros ? 0 : 1);
  std::vector<SymExpr> out_shape = shape_of(p.output(0));
  std::vector<SymExpr> strides = row_major(out_shape);
  auto rank = static_cast<int64_t>(out_shape.size());
  DType index_type = indices->type().dtype();
  Instr st;
  st.op = Op::Store;
  st.buffer = static_cast<int>(fusion_.num_inputs());
  st.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), SymExpr()};
  int inside = -1;
  if (p.op_type() == "ScatterND") {
    // The domain is (i..., t...): the tuple's q - 1 axes, then the data's axes from m on.
    View view = view_of(indices);
    size_t q = view.shape.size();
    const SymExpr& tuple = view.shape.back();
    if (!tuple.is_constant()) fail(&p, "index tuples of a symbolic length");
    auto m = static_cast<size_t>(tuple.constant_value());
    std::vector<size_t> leading(q - 1);
    std::iota(leading.begin(), leading.end(), size_t{0});
    int offset = -1;
    for (size_t j = 0; j < m; ++j) {
      int entry = emit(aligned_load(view, index_type, leading, 0, view.strides[q - 1] * c(static_cast<int64_t>(j))));
      auto [wrapped, in] = axis_index(entry, index_type, out_shape[j]);
      int term = emit(Op::Mul, DType::I64, {wrapped, size_value(DType::I64, strides[j])});
      offset = offset < 0 ? term : emit(Op::Add, DType::I64, {offset, term});
      inside = inside < 0 ? in : emit(Op::And, DType::Bool, {inside, in});
    }
    for (size_t d = m; d < out_shape.size(); ++d) st.index.strides[q - 1 + d - m] = strides[d];
    st.dynamic = offset;
    st.dynamic_stride = c(1);
  } else {
    int64_t axis = p.get_int("axis", 0);
    if (axis < 0) axis += rank;
    auto [wrapped, in] = axis_index(lower(indices, 0), index_type, out_shape.at(static_cast<size_t>(axis)));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis) st.index.strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d)];
    st.dynamic = wrapped;
    st.dynamic_stride = strides[static_cast<size_t>(axis)];
    inside = in;
  }
  const std::string reduction = zeros ? "add" : p.get_string("reduction", "none");
  st.accumulate = reduction == "add"   ? kir::Accumulate::Add
                  : reduction == "mul" ? kir::Accumulate::Mul
                  : reduction == "max" ? kir::Accumulate::Max
                  : reduction == "min" ? kir::Accumulate::Min
                                       : kir::Accumulate::None;
  st.args = {lower(p.input(zeros ? 1 : 2), 0), inside};
  emit(std::move(st));
}

namespace {

// CumSum's axis (a literal: its kernel role asks for one), from the end where negative.
int64_t scan_axis(const Node& p) {
  const Tensor* axis = constant_of(p.input(1));
  TCC_CHECK(axis != nullptr && axis->numel() == 1) << "CumSum '" << p.name() << "' has no literal axis";
  return normalize_axis(p, axis->get_i64(0), static_cast<int64_t>(p.output(0)->type().rank()));
}

}  // namespace

// CumSum's domain is its output's axes but the summed one, then that one,
// the kernel's one reduced axis: a reduction kernel whose rows are scanned.
void Lowering::setup_scan(const Node& p) {
  if (fusion_.num_outputs() != 1 || body_.outputs().front() != p.output(0))
    fail(&p, "is lowered only as a kernel of its own");
  k_.kind = kir::Kind::Reduction;
  std::vector<SymExpr> shape = shape_of(p.output(0));
  auto axis = static_cast<size_t>(scan_axis(p));
  std::vector<int> to_domain(shape.size());
  for (size_t a = 0; a < shape.size(); ++a) {
    if (a == axis) continue;
    to_domain[a] = static_cast<int>(k_.domain.size());
    k_.domain.push_back(shape[a]);
  }
  to_domain[axis] = static_cast<int>(k_.domain.size());
  k_.domain.push_back(shape[axis]);
  k_.reduce_axes = 1;
  frames_.push_back(Frame{shape, to_domain});
}

// CumSum: the running sum (Op::ScanSum) of x along the row, stored where
// it was read; reverse reads and stores the row from its end (a negative
// stride), exclusive sums the element one step back instead (0 at the first:
// a guarded load).
void Lowering::lower_scan(const Node& p) {
  std::vector<SymExpr> shape = shape_of(p.output(0));
  std::vector<size_t> all(shape.size());
  std::iota(all.begin(), all.end(), size_t{0});
  DType dt = p.output(0)->type().dtype();
  const size_t j = k_.domain.size() - 1;
  Instr load = aligned_load(view_of(p.input(0)), dt, all, 0, c(0));
  Instr store = aligned_load(contiguous(static_cast<int>(fusion_.num_inputs()), shape), dt, all, 0, c(0));
  if (p.get_int("reverse", 0) != 0)
    for (Instr* in : {&load, &store}) {
      SymExpr step = in->index.strides[j];
      in->index.offset = in->index.offset + (k_.domain[j] - c(1)) * step;
      in->index.strides[j] = c(0) - step;
    }
  if (p.get_int("exclusive", 0) != 0) {
    load.index.offset = load.index.offset - load.index.strides[j];
    load.args = {emit(Op::Greater, DType::Bool, {coordinate(static_cast<int>(j)), constant(DType::I64, 0)})};
  }
  int sum = emit(Op::ScanSum, dt, {emit(std::move(load))});
  store.op = Op::Store;
  store.args = {sum};
  emit(std::move(store));
}

// Concat along `axis`: at each point, input i where the coordinate falls in
// its range [start_i, start_i + size_i), at coordinate - start_i: loaded from
// its buffer, or computed by the pointwise nodes of the body that compute it
// (another Concat among them), each in a frame of its own whose origin is
// start_i past the Concat's own. Every load of input i is guarded by its
// range (and by the Concat's own frame's guard), so no address outside it is
// read; a chain of Wheres picks the one that holds.
int Lowering::lower_concat(const Node& p, int frame) {
  if (k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only in a pointwise kernel");
  const Frame& outer = frames_.at(frame);  // a deque: stays valid as frames are added below
  auto rank = static_cast<int64_t>(shape_of(p.output(0)).size());
  if (static_cast<size_t>(rank) != outer.shape.size())
    fail(&p, "its output has fewer axes than the kernel domain it is computed over");
  int64_t axis = p.get_int("axis", 0);
  if (axis < 0) axis += rank;
  DType dt = p.output(0)->type().dtype();
  const int along = outer.to_domain.at(static_cast<size_t>(axis));
  int at = frame_coordinate(frame, along);
  int result = -1;
  SymExpr start = c(0);
  for (const Value* x : p.inputs()) {
    SymExpr size = shape_of(x).at(static_cast<size_t>(axis));
    int from = emit(Op::GreaterOrEqual, DType::Bool, {at, size_value(DType::I64, start)});
    int below = emit(Op::Less, DType::Bool, {at, size_value(DType::I64, start + size)});
    int inside = emit(Op::And, DType::Bool, {from, below});
    Frame operand = outer;
    operand.shape[static_cast<size_t>(axis)] = size;
    if (operand.origin.empty()) operand.origin.assign(k_.domain.size(), SymExpr());
    operand.origin[static_cast<size_t>(along)] = operand.origin[static_cast<size_t>(along)] + start;
    operand.guard = outer.guard >= 0 ? emit(Op::And, DType::Bool, {outer.guard, inside}) : inside;
    frames_.push_back(std::move(operand));
    int value = lower(x, static_cast<int>(frames_.size()) - 1);
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
// padded axis reads nothing (the interpreter refuses it). tcc::Pad's pads are
// symbolic: sizes of the kernel.
int Lowering::lower_pad(const Node& p, int frame) {
  if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a copy kernel of its own");
  View view = view_of(p.input(0));
  auto rank = static_cast<int64_t>(view.shape.size());
  std::vector<SymExpr> begin(static_cast<size_t>(rank), c(0)), end(static_cast<size_t>(rank), c(0));
  if (p.domain() == kTccDomain) {
    std::vector<std::pair<Dim, Dim>> pads = tcc_pads(p, begin.size());
    for (size_t d = 0; d < begin.size(); ++d) {
      begin[d] = pads[d].first.expr();
      end[d] = pads[d].second.expr();
    }
  } else {
    std::vector<int64_t> axes(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), int64_t{0});
    if (p.has_input(3)) axes = constant_of(p.input(3))->to_i64_vector();
    std::vector<int64_t> pads = constant_of(p.input(1))->to_i64_vector();
    if (pads.size() != 2 * axes.size()) fail(&p, "has " + std::to_string(pads.size()) + " pads for " +
                                                 std::to_string(axes.size()) + " axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (a < 0 || a >= rank) fail(&p, "pads axis " + std::to_string(axes[i]) + " outside its rank");
      begin[static_cast<size_t>(a)] = c(pads[i]);
      end[static_cast<size_t>(a)] = c(pads[i + axes.size()]);
    }
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
    if (begin[d] == c(0) && end[d] == c(0)) {
      load.index.strides[to_domain[d]] = view.strides[d];
      continue;
    }
    int at = emit(Op::Sub, DType::I64, {coordinate(to_domain[d]), size_value(DType::I64, begin[d])});
    int size = size_value(DType::I64, view.shape[d]), zero = constant(DType::I64, 0);
    if (mode == "constant") {
      load.index.strides[to_domain[d]] = view.strides[d];
      load.index.offset = load.index.offset - begin[d] * view.strides[d];
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
  return emit(Op::Where, dt, {inside, value, pad_fill(p)});
}

// Pad node p's fill: a literal when constant (0 when absent or empty), else
// the element of the scalar buffer that holds it.
int Lowering::pad_fill(const Node& p) {
  DType dt = p.output(0)->type().dtype();
  if (!p.has_input(2)) return constant(dt, 0.0);
  if (const Tensor* fill = constant_of(p.input(2)))
    return constant(dt, fill->numel() > 0 ? fill->get_f64(0) : 0.0);
  View view = view_of(p.input(2));
  Instr load;
  load.op = Op::Load;
  load.dtype = dt;
  load.buffer = view.buffer;
  load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), view.offset};
  return emit(std::move(load));
}

// An index `index` (an instruction of integer `dtype`) into an axis of
// `extent`, a negative one counted from the end: {the i64 position, whether
// it falls inside the axis}.
std::pair<int, int> Lowering::axis_index(int index, DType dtype, const SymExpr& extent) {
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
int Lowering::lower_gather(const Node& p, int frame) {
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
Instr Lowering::aligned_load(const View& view, DType dtype, const std::vector<size_t>& view_axes, size_t first,
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
int Lowering::lower_gather_elements(const Node& p, int frame) {
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
int Lowering::lower_gather_nd(const Node& p, int frame) {
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

// MaxPool, AveragePool and depthwise Conv, the window unrolled: at output
// point (n, c, o...), tap r... reads X at o * stride - pad_begin + r * dilation
// along each spatial dim. Where that position can fall outside the input
// (known from the static extents, else assumed), the tap's load is guarded by
// it, so no address outside X is read: MaxPool takes -inf there, AveragePool
// and Conv 0, and AveragePool's divisor counts the taps inside the input (or,
// with count_include_pad, those before the end padding: ceil_mode windows
// reach past it). Conv weighs tap r by W[c, 0, r...] and adds B[c]. An int8
// or uint8 MaxPool takes the dtype's least value outside the input, and 0
// where no tap is inside, as the interpreter.
// MaxPool's Indices output is the flat position in X of the tap each point took
// (its spatial part row-major, or column-major with storage_order 1): the first
// inside tap, then any that is greater or NaN, as the interpreter scans.
// Records the value of each output in values_.
void Lowering::lower_pool(const Node& p, int frame) {
  if (frame != 0 || k_.kind != kir::Kind::Pointwise) fail(&p, "is lowered only as a kernel of its own");
  const bool conv = p.op_type() == "Conv";
  PoolWindow w;
  if (std::string why = conv ? depthwise_window(p, &w) : pool_window(p, &w); !why.empty()) fail(&p, why);
  View x = view_of(p.input(0));
  std::vector<SymExpr> out = shape_of(p.output(0));
  const std::vector<int>& to_domain = frames_[0].to_domain;
  size_t ns = w.kernel.size();
  DType dt = p.output(0)->type().dtype();
  bool max = p.op_type() == "MaxPool";
  bool exact = max && is_integer(dt);  // int8 or uint8 (pool_window)
  // A depthwise Conv's W and B, viewed once for every tap.
  View weights, bias;
  if (conv) weights = view_of(p.input(1));
  if (conv && p.has_input(2)) bias = view_of(p.input(2));
  // Channel c's element of a per-channel operand: B[c], or W[c, 0, tap...].
  auto per_channel = [&](const View& operand, const std::vector<int64_t>& tap) {
    Instr load;
    load.op = Op::Load;
    load.dtype = dt;
    load.buffer = operand.buffer;
    load.index = kir::Index{std::vector<SymExpr>(k_.domain.size()), operand.offset};
    load.index.strides[to_domain[1]] = operand.strides[0];
    for (size_t d = 0; d < tap.size(); ++d)
      load.index.offset = load.index.offset + operand.strides[2 + d] * c(tap[d]);
    return emit(std::move(load));
  };
  bool indices = max && p.num_outputs() > 1 && p.output(1) != nullptr;
  std::vector<SymExpr> x_strides = row_major(x.shape);
  std::vector<SymExpr> index_strides = x_strides;
  if (p.get_int("storage_order", 0) != 0) {
    SymExpr stride = c(1);
    for (size_t d = 0; d < ns; ++d) {
      index_strides[2 + d] = stride;
      stride = stride * x.shape[2 + d];
    }
  }
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
    if (conv) value = emit(Op::Mul, dt, {loaded, per_channel(weights, tap)});
    if (max && inside >= 0) {
      double least = !exact ? -std::numeric_limits<double>::infinity() : dt == DType::I8 ? -128 : 0;
      value = emit(Op::Where, dt, {inside, value, constant(dt, least)});
    }
    if (indices) {
      int at = plane;
      for (size_t d = 0; d < ns; ++d)
        at = emit(Op::Add, DType::I64,
                  {at, emit(Op::Mul, DType::I64,
                            {position(d, tap[d] * w.dilations[d] - w.pads_begin[d]),
                             size_value(DType::I64, index_strides[2 + d])})});
      int took = inside;
      if (have != kNever) {
        int better = emit(Op::Greater, DType::Bool, {loaded, result});
        if (!exact) better = emit(Op::Or, DType::Bool, {better, emit(Op::IsNaN, DType::Bool, {loaded})});
        if (have >= 0) better = emit(Op::Or, DType::Bool, {better, emit(Op::Not, DType::Bool, {have})});
        took = all(took, better);
      }
      best = took < 0 ? at : emit(Op::Where, DType::I64, {took, at, best < 0 ? constant(DType::I64, -1) : best});
    }
    if (indices || exact)
      have = have == -1 || inside < 0 ? -1 : have == kNever ? inside : emit(Op::Or, DType::Bool, {have, inside});
    result = result < 0 ? value : emit(max ? Op::Max : Op::Add, dt, {result, value});
    int counts = w.count_include_pad ? in_padding : inside;
    if (conv) continue;
    if (!max && counts < 0) {
      ++always_counted;
    } else if (!max) {
      int one = emit(Op::Cast, dt, {counts});
      counted = counted < 0 ? one : emit(Op::Add, dt, {counted, one});
    }
  }
  if (indices) values_.emplace(std::make_pair(p.output(1), frame), best);
  if (exact && have >= 0) result = emit(Op::Where, dt, {have, result, constant(dt, 0)});
  if (conv) {
    if (p.has_input(2)) result = emit(Op::Add, dt, {result, per_channel(bias, {})});
  } else if (!max) {
    int divisor = constant(dt, static_cast<double>(always_counted));
    if (counted >= 0) divisor = always_counted == 0 ? counted : emit(Op::Add, dt, {counted, divisor});
    result = emit(Op::Div, dt, {result, divisor});
  }
  values_.emplace(std::make_pair(p.output(0), frame), result);
}

}  // namespace tcc::lowering
