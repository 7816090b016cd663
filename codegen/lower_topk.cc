// TopK kernels: a TopK node whose kernel role is TopK, lowered to its TopKDesc
// (lowering.h, kernel_ir.h).
#include <string>
#include <vector>

#include "codegen/lowering.h"

namespace tcc::lowering {

void Lowering::setup_topk(const Node& t) {
  k_.kind = kir::Kind::TopK;
  if (body_.nodes().size() != 1 || !is_body_input(t.input(0))) fail(&t, "is lowered only as a kernel of its own");
  const std::vector<SymExpr> xs = shape_of(t.input(0));
  const auto rank = static_cast<int64_t>(xs.size());
  int64_t axis = t.get_int("axis", -1);
  if (axis < 0) axis += rank;
  const auto at = static_cast<size_t>(axis);
  const SymExpr k = shape_of(t.output(0))[at];
  if (!xs[at].is_constant() || !k.is_constant()) fail(&t, "has a symbolic row or k");
  kir::TopKDesc d;
  d.x = input_buffer(t.input(0));
  d.length = xs[at].constant_value();
  d.largest = t.get_int("largest", 1) != 0;
  const SymExpr outer = product(xs, 0, at), inner = product(xs, at + 1, xs.size());
  k_.domain = {outer, k, inner};
  k_.topk = d;

  // Values (TopKValue) and Indices (TopKIndex), whichever the graph reads, at [outer, k, inner] contiguous.
  for (size_t j = 0; j < body_.outputs().size(); ++j) {
    const Value* out = body_.outputs()[j];
    const bool values = out == t.output(0);
    if (!values && out != t.output(1)) fail(&t, "an output of its kernel is not Values or Indices");
    Instr st;
    st.op = Op::Store;
    st.dtype = out->type().dtype();
    st.args = {emit(values ? Op::TopKValue : Op::TopKIndex, st.dtype, {})};
    st.buffer = static_cast<int>(fusion_.num_inputs() + j);
    st.index.strides = {k * inner, inner, c(1)};
    emit(std::move(st));
  }
}

}  // namespace tcc::lowering
