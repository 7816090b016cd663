// conv1x1_matmul: a convolution whose window is one pixel is a matrix product
// of its weights by the input's channels, which cuBLASLt computes with a
// fraction of the host time cuDNN's legacy API spends per call (about 40 us
// a convolution on the H200 run of 2026-11-27, most of the CNNs' default
// step) and whose epilogues the GEMM fusion already knows.
//
// Rewrites, for Conv(X, W, B) with W [Co, Ci, 1, ..., 1], one group, strides
// and dilations of 1 and no padding:
//   spatial dims all 1 (a squeeze-excitation's or a classifier's Conv):
//     Reshape(Gemm(Reshape(X, [0, Ci]), W2, B, transB=1), [0, Co, 1, ...])
//   otherwise:
//     Add(Reshape(MatMul(W2, Reshape(X, [0, Ci, -1])), [0, Co, d...]), B3)
// where W2 is W viewed [Co, Ci] and B3 is B viewed [Co, 1, ...] (new
// initializers when W and B are constant, Reshape nodes otherwise), and d...
// are the output's spatial dims with -1 for the one that may be symbolic.
// The reshapes are views; the batched MatMul reads W2 for every image (a
// zero batch stride); the bias Add joins the pointwise kernel after it
// (cuBLASLt's bias runs along the other axis). Sums run in another order than
// cuDNN's, so results agree within float rounding.
//
// Expects: types from shape inference.
// Leaves alone: a Conv that conv_window refuses (no GPU convolution), any
// other window, stride, dilation, padding or grouping, more than one symbolic
// spatial dim, and main-graph outputs.
#include <algorithm>

#include "passes/rewrite.h"
#include "src/ops/kernel_roles.h"

namespace tcc {

namespace {

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
}

// v (static) viewed as `sizes`: a new initializer when v is constant, else a Reshape before `at`.
Value* view(Node& at, Value* v, const std::vector<int64_t>& sizes) {
  Dims dims(sizes.begin(), sizes.end());
  if (std::optional<Tensor> t = constant_value(v)) {
    Graph& g = *at.graph();
    return g.add_initializer(g.fresh_name(v->name()), t->reshaped(sizes));
  }
  return insert_reshape(*at.graph(), &at, v, sizes, Type::tensor(v->type().dtype(), dims), at.name(), at.source());
}

bool conv_to_matmul(Node& conv, Rewriter& rw) {
  Value* y = conv.output(0);
  if (!conv.domain().empty() || is_model_output(y) || !y->type().is_tensor() || !y->type().has_rank()) return false;
  ConvWindow cw;
  if (!conv_window(conv, &cw).empty() || cw.groups != 1 || !all_equal(cw.kernel, 1) || !all_equal(cw.strides, 1) ||
      !all_equal(cw.dilations, 1) || !all_equal(cw.pads, 0))
    return false;
  const Dims& out = y->type().shape();
  const Dims& ws = conv.input(1)->type().shape();
  if (!ws[1].is_static()) return false;
  const int64_t co = ws[0].value(), ci = ws[1].value();
  const DType dt = y->type().dtype();
  std::vector<int64_t> spatial;  // the output's spatial dims, -1 for a symbolic one
  for (size_t d = 2; d < out.size(); ++d) spatial.push_back(out[d].is_static() ? out[d].value() : -1);
  if (std::count(spatial.begin(), spatial.end(), -1) > 1) return false;
  Value* x = conv.input(0);
  Value* w = view(conv, conv.input(1), {co, ci});
  std::vector<int64_t> back = {0, co};
  back.insert(back.end(), spatial.begin(), spatial.end());
  Graph& g = *conv.graph();
  Value* result = nullptr;
  if (all_equal(spatial, 1)) {
    Value* rows = insert_reshape(g, &conv, x, {0, ci}, Type::tensor(dt, {out[0], Dim(ci)}), conv.name(), conv.source());
    std::vector<Value*> operands = {rows, w};
    if (conv.has_input(2)) operands.push_back(conv.input(2));
    Node* gemm = g.insert_node(&conv, "Gemm", operands, {g.fresh_name(y->name())}, "", conv.name());
    gemm->set_source(conv.source());
    gemm->set_attr("transB", Attribute::of_int(1));
    gemm->output(0)->set_type(Type::tensor(dt, {out[0], Dim(co)}));
    result = insert_reshape(g, &conv, gemm->output(0), back, y->type(), conv.name(), conv.source());
  } else {
    Dim pixels = out[2];
    for (size_t d = 3; d < out.size(); ++d) pixels = Dim(pixels.expr() * out[d].expr());
    Value* columns = insert_reshape(g, &conv, x, {0, ci, -1}, Type::tensor(dt, {out[0], Dim(ci), pixels}), conv.name(),
                                   conv.source());
    Node* mm = g.insert_node(&conv, "MatMul", {w, columns}, {g.fresh_name(y->name())}, "", conv.name());
    mm->set_source(conv.source());
    mm->output(0)->set_type(Type::tensor(dt, {out[0], Dim(co), pixels}));
    result = insert_reshape(g, &conv, mm->output(0), back, y->type(), conv.name(), conv.source());
    if (conv.has_input(2)) {
      std::vector<int64_t> along(out.size() - 1, 1);
      along[0] = co;
      Node* add = g.insert_node(&conv, "Add", {result, view(conv, conv.input(2), along)},
                                {g.fresh_name(y->name())}, "", conv.name());
      add->set_source(conv.source());
      add->output(0)->set_type(y->type());
      result = add->output(0);
    }
  }
  return rw.replace(y, result);
}

const std::vector<RewriteRule> kRules = {
    // Conv(X, W[Co, Ci, 1...], B) -> MatMul(W2, X viewed [N, Ci, pixels]) viewed back, + B
    {"Conv", "convolutions_as_matmul", conv_to_matmul},
};

}  // namespace

bool conv1x1_matmul(Graph& g, PassContext& ctx) { return apply_rewrites(g, kRules, ctx.stats); }

}  // namespace tcc
