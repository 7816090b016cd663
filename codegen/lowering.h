// The lowering of one fusion node to a kernel (lower.h), split by kernel kind:
// lower.cc holds the frames, views, values and the pointwise and reduction
// bodies every kind shares; lower_indexed.cc the kernels whose loads are
// guarded or indexed (Concat, Pad, the gathers, the scatters, pools);
// lower_library.cc the gemm and conv kernels a library call computes;
// lower_attention.cc, lower_topk.cc, lower_recurrence.cc, lower_nms.cc and
// lower_roi_align.cc the templates' descriptions.
// Internal to codegen.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/kernel_ir.h"
#include "passes/pass.h"
#include "src/ir/graph.h"

namespace tcc::lowering {

using kir::Instr;
using kir::Op;

inline SymExpr c(int64_t v) { return SymExpr::constant(v); }
inline bool is_one(const SymExpr& d) { return d.is_constant() && d.constant_value() == 1; }
SymExpr product(const std::vector<SymExpr>& es, size_t begin, size_t end);
std::vector<SymExpr> row_major(const std::vector<SymExpr>& shape);
std::string who(const Node& n);

// An affine view of a buffer: element (i_0, ..., i_r-1) of a value of `shape`
// lies at offset + sum_k i_k * strides[k] in buffer `buffer`.
struct View {
  int buffer = -1;
  std::vector<SymExpr> shape, strides;
  SymExpr offset;
};

// A value of rank r lines up with the last r axes of the frame's shape; frame
// axis a is domain axis to_domain[a] (-1: an axis of extent 1 the domain lacks).
// A Concat input's frame (lower_concat) is shifted along the Concat's axis:
// `origin`, per domain axis (empty: 0 on every one), is the domain coordinate
// of the frame's coordinate 0, and every load in it takes `guard` (-1: none),
// which holds where the Concat takes that input.
struct Frame {
  Frame(std::vector<SymExpr> shape, std::vector<int> to_domain)
      : shape(std::move(shape)), to_domain(std::move(to_domain)) {}
  std::vector<SymExpr> shape;
  std::vector<int> to_domain;
  std::vector<SymExpr> origin;
  int guard = -1;
};

bool is_reduction(const Node& n);
bool is_movement(const Node& n);
// tcc::ScatterAdd, ScatterElements and ScatterND: kernels that iterate their
// updates and store each where its index says.
bool is_scatter(const Node& n);
// CumSum, the kernel's one node: a scan along an axis.
bool is_scan(const Node& n);

class Lowering {
 public:
  Lowering(const Node& fusion, const std::string& name, Precision precision);
  kir::Kernel run();

 private:
  [[noreturn]] void fail(const Node* body_node, const std::string& msg) const;
  std::vector<SymExpr> shape_of(const Value* v) const;
  void add_buffer(const Value* v, bool output);
  int input_buffer(const Value* v) const;
  bool is_body_input(const Value* v) const { return v->is_graph_input() && v->graph() == &body_; }

  // ---- domains ----------------------------------------------------------------

  static std::vector<int> iota(size_t n);

  // Whether `small` broadcasts to `big` (right-aligned, each dim equal or 1).
  static bool broadcasts_to(const std::vector<SymExpr>& small, const std::vector<SymExpr>& big);

  // The domain is the output every other output broadcasts to; smaller outputs
  // store the same element from several points, which is harmless.
  void setup_pointwise();

  // The domain is the updates' shape; the output starts as zeros
  // (tcc::ScatterAdd) or as a copy of the data (Kernel::copy_from).
  void setup_scatter(const Node& p);

  // Each update is stored into the output, combined with the element there as
  // the reduction says (ScatterAdd: add; none: replaced): ScatterAdd's and
  // ScatterElements' at the update's own coordinates, the axis's replaced by
  // its index; ScatterND's at (tuple..., t...) for the update at (i..., t...),
  // the tuple indices[i..., 0 .. m-1]. A negative index counts from the end;
  // an update with an index outside its axis stores nothing (the interpreter
  // rejects it). With reduction none, updates to one element leave one of them,
  // which one unspecified on the GPU (ONNX leaves it undefined).
  void lower_scatter(const Node& p);

  // CumSum's domain is its output's axes but the summed one, then that one,
  // the kernel's one reduced axis: a reduction kernel whose rows are scanned.
  void setup_scan(const Node& p);

  // CumSum: the running sum (Op::ScanSum) of x along the row, stored where
  // it was read; reverse reads and stores the row from its end (a negative
  // stride), exclusive sums the element one step back instead (0 at the first:
  // a guarded load).
  void lower_scan(const Node& p);
  void setup_reduction();

  // ---- axis maps and indices --------------------------------------------------

  // For each axis of v: the domain axis it runs along in `frame`, or -1 for an
  // axis of extent 1 (its coordinate is always 0).
  std::vector<int> axis_map(const Value* v, int frame) const;
  kir::Index index_of(const View& view, const std::vector<int>& map) const;

  // ---- views of body inputs ---------------------------------------------------

  View contiguous(int buffer, std::vector<SymExpr> shape) const;

  // Strides with every axis of extent 1 zeroed: such an axis is never stepped,
  // so views that differ only there address the same elements.
  static std::vector<SymExpr> stepped_strides(const View& v);
  View view_of(const Value* v);
  View transpose(const Node& p, const View& in, std::vector<SymExpr> out_shape) const;
  View expand(const Node& p, const View& in, std::vector<SymExpr> out_shape) const;

  // Reshape, Flatten, Squeeze and Unsqueeze. A contiguous view takes the row-major
  // strides of its new shape; any view may split its axes (split_axes): the
  // run of axes cut from one keeps its stride at the innermost and steps by
  // the extents inside it further out.
  View reshape(const Node& p, const View& in, std::vector<SymExpr> out_shape) const;

  // Where a slice starts along an axis of extent d, clamped as ONNX does.
  static SymExpr slice_start(const SymExpr& d, int64_t start, int64_t step);
  std::vector<int64_t> constant_ints(const Node& p, size_t input);
  View slice(const Node& p, const View& in, std::vector<SymExpr> out_shape);

  // ---- instructions -----------------------------------------------------------

  bool reads_reduced_axes(const kir::Index& ix) const;
  int emit(Instr in);
  int emit(Op op, DType dtype, std::vector<int> args);
  int constant(DType dtype, double value);

  // The point's coordinate along domain axis `axis`, as an i64.
  int coordinate(int axis);
  // The same in `frame`'s terms: less the frame's origin along the axis.
  int frame_coordinate(int frame, int axis);
  int size_value(DType dtype, const SymExpr& size);

  // ---- values -----------------------------------------------------------------

  // The frame a value naturally lines up with: a keepdims=0 reduction's result
  // and what is computed from it alone use the kept axes (frame 1), everything
  // else the main frame (0); -1 for values that take their consumer's frame.
  // A value with more axes than the kept frame, such as x - max(x) with
  // keepdims=0, broadcasts the result back over the reduced input: frame 0.
  int natural_frame(const Value* v);
  int lower(const Value* v, int frame);
  int lower_uncached(const Value* v, int frame);
  int lower_reduction(const Node& p, int frame);

  // Concat along `axis`: at each point, input i where the coordinate falls in
  // its range [start_i, start_i + size_i), at coordinate - start_i: loaded
  // from its buffer, or computed by the pointwise nodes of the body that
  // compute it (another Concat among them), each in a frame of its own whose
  // origin is start_i past the Concat's own. Every load of input i is guarded
  // by its range (and by the Concat's own frame's guard), so no address
  // outside it is read; a chain of Wheres picks the one that holds.
  int lower_concat(const Node& p, int frame);

  // Pad, (begin, end) per axis; negative pads crop. Constant mode: at each
  // point, the input where every padded axis's coordinate c has begin <= c <
  // begin + size, read at c - begin, else the fill; the load is guarded by that
  // range, so no address outside the input is read. Edge, reflect and wrap
  // read every point from a source coordinate per padded axis (clamped,
  // mirrored without repeating the edge, or taken modulo the size, as the
  // interpreter's pad_source), summed into the load's computed index; an empty
  // padded axis reads nothing (the interpreter refuses it).
  int lower_pad(const Node& p, int frame);
  // Its fill: a literal, or loaded from the scalar buffer a graph input or an
  // earlier kernel holds it in.
  int pad_fill(const Node& p);

  // An index `index` (an instruction of integer `dtype`) into an axis of
  // `extent`, a negative one counted from the end: {the i64 position, whether
  // it falls inside the axis}.
  std::pair<int, int> axis_index(int index, DType dtype, const SymExpr& extent);

  // Gather along `axis`: output point (outer..., i..., inner...) reads data at
  // (outer..., indices[i...], inner...). A negative index counts from the end;
  // one outside the axis reads nothing and gives 0 (the interpreter rejects it).
  int lower_gather(const Node& p, int frame);

  // A load of buffer `view` at the output point, its axes lined up with the
  // output's axes `first`, `first` + 1, ... (those of extent 1 the domain
  // lacks contribute nothing), plus `offset`.
  Instr aligned_load(const View& view, DType dtype, const std::vector<size_t>& view_axes, size_t first,
                     const SymExpr& offset);

  // GatherElements along `axis`: output point i reads data at i with its
  // coordinate along the axis replaced by indices[i] (negative counts from the
  // end; outside the axis reads nothing and gives 0).
  int lower_gather_elements(const Node& p, int frame);

  // GatherND with batch_dims b and index tuples of r entries: output point
  // (batch..., i..., t...) reads data at (batch..., indices[batch..., i..., 0 .. r-1], t...),
  // each entry checked against its axis (negative counts from the end; a tuple
  // with an entry outside reads nothing and gives 0).
  int lower_gather_nd(const Node& p, int frame);

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
  void lower_pool(const Node& p, int frame);

  // A pointwise node's value at the point: its OpDef's scalar expression over
  // its inputs' values, built into the kernel's body.
  int lower_pointwise(const Node& p, int frame);

  // ---- gemm -------------------------------------------------------------------

  // Batch dims of an operand against the domain's: every one (full) or none
  // (broadcast over the whole batch). A MatMul broadcasting only some, which
  // one strided call cannot do, has no kernel role (strided_batches), so
  // verify_fusion keeps it out of any body lowered here.
  enum class Batch { Full, None };
  static Batch batch_kind(const std::vector<SymExpr>& dims);
  void setup_gemm();

  // The contraction's own result: Gemm scales by alpha and adds beta * C.
  int gemm_result(const Node& mm, int acc, kir::GemmDesc& g);
  enum class Addend { Bias, Residual };

  // Records an addend of the product in g: a residual (C, the output's shape)
  // or a bias along N.
  Addend add_to_gemm(const Node& at, const Value* v, kir::GemmDesc& g);

  // Checks that the epilogue is what cuBLASLt applies, D = act(AB + C + bias),
  // and fills in bias, residual and activation.
  void describe_epilogue(const Node& mm, kir::GemmDesc& g);

  // The activation `library`'s epilogue (LibraryEpilogue `epilogue`) applies
  // as u, as its call names it; fails saying why u is none.
  std::string activation(const Node& u, const std::string& library, uint32_t epilogue);

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

  void setup_conv();
  // An attention node, the kernel's one node besides views of its operands
  // and its output (lower_attention.cc): its AttentionDesc, the domain [batch,
  // heads, q_len, v_head_size] and one store of its AttentionAcc.
  void setup_attention(const Node& a);
  // Element strides per batch, head and row at which that store writes Y, the
  // attention's output, into the buffer of body output `out`: Y itself, or a
  // Transpose of Y that keeps the last axis last followed by reshapes (fuse:
  // the attention's output view; Llama's and BERT's merge of heads into
  // [b, s, h * d]), where element (b, h, i, e) of Y lies at the row-major
  // place of its transposed coordinates.
  std::array<SymExpr, 3> store_strides(const Node& a, const Value* out, const SymExpr& heads,
                                       const SymExpr& size) const;
  // A TopK node, the kernel's one node (lower_topk.cc): its TopKDesc, the
  // domain [outer, k, inner] and a store of TopKValue into Values and of
  // TopKIndex into Indices, of those the graph reads.
  void setup_topk(const Node& t);
  // A tcc::Recurrence node, the kernel's one node (lower_recurrence.cc): its
  // RecurrenceDesc, the domain [directions, batch] and each activation's
  // RecurrenceArg, scalar instructions and RecurrenceResult.
  void setup_recurrence(const Node& n);
  // A tcc::NmsSelect node, the kernel's one node (lower_nms.cc): its NmsDesc
  // over the domain [batch, classes].
  void setup_nms(const Node& n);
  // A tcc::RoiAlign node, the kernel's one node (lower_roi_align.cc): its
  // RoiAlignDesc over the domain of its output.
  void setup_roi_align(const Node& n);

  // Records an addend of the convolution in d: a residual of the output's
  // shape, or a bias with one value per output channel.
  void add_to_conv(const Node& at, const Value* v, kir::ConvDesc& d);

  // ---- outputs and sizes ------------------------------------------------------

  void store_output(const Value* v, int buffer);
  void collect_size_params();
  const Node& fusion_;
  const Graph& body_;
  Precision precision_;  // --precision: TF32 marks an f32 attention forward (lower_attention.cc)
  kir::Kernel k_;
  std::deque<Frame> frames_;  // lower_concat adds frames while others are in use
  std::vector<int64_t> axes_;  // reduction kernels: the reduced axes of the frame-0 shape
  std::map<std::pair<const Value*, int>, int> values_;
  std::unordered_map<const Value*, int> natural_;
  std::unordered_map<const Node*, int> reductions_;
  std::unordered_map<std::string, int> leaves_;
};

}  // namespace tcc::lowering
