// Recurrence kernels: a tcc::Recurrence node, lowered to its RecurrenceDesc
// and its activations' scalar instructions (lowering.h, kernel_ir.h).
#include <iterator>
#include <string>
#include <vector>

#include "codegen/lowering.h"
#include "src/ops/recurrent.h"

namespace tcc::lowering {

void Lowering::setup_recurrence(const Node& n) {
  k_.kind = kir::Kind::Recurrence;
  if (body_.nodes().size() != 1) fail(&n, "is lowered only as a kernel of its own");
  for (const Value* v : n.inputs())
    if (v != nullptr && !is_body_input(v)) fail(&n, "an operand is not a body input");
  const RecurrenceAttrs a = recurrence_attrs(n);
  kir::RecurrenceDesc d;
  d.cell = a.cell;
  d.directions = a.directions;
  d.hidden = a.hidden;
  d.reverse = a.reverse;
  d.clip = a.clip.value_or(0);
  d.linear_before_reset = a.linear_before_reset;
  d.input_forget = a.input_forget;
  const std::vector<SymExpr> xw = shape_of(n.input(0));
  d.seq = xw[0];
  d.batch = xw[1];
  // XW, R, B, sequence_lens, initial_h, initial_c, P: the node's inputs in order.
  int* inputs[] = {&d.xw, &d.r, &d.b, &d.lens, &d.init_h, &d.init_c, &d.p};
  for (size_t i = 0; i < n.num_inputs() && i < std::size(inputs); ++i)
    if (n.input(i) != nullptr) *inputs[i] = input_buffer(n.input(i));
  int* outputs[] = {&d.y, &d.y_h, &d.y_c};
  for (size_t j = 0; j < body_.outputs().size(); ++j)
    for (size_t o = 0; o < n.num_outputs(); ++o)
      if (body_.outputs()[j] == n.output(o)) *outputs[o] = static_cast<int>(fusion_.num_inputs() + j);
  k_.domain = {c(d.directions), d.batch};
  k_.recurrence = d;

  // Each activation's expression from its argument, as the node's activation table builds it.
  const DType t = n.input(0)->type().dtype();
  struct Builder : ScalarBuilder {
    explicit Builder(Lowering& l) : l_(l) {}
    int op(ScalarOp op, DType dtype, std::vector<int> args) override {
      return l_.emit(kir::kernel_op(op), dtype, std::move(args));
    }
    int constant(DType dtype, double value) override { return l_.constant(dtype, value); }
    int coordinate(const Node&, int) override { throw InternalError("an activation reads no coordinate"); }
    int size(DType dtype, const SymExpr& size) override { return l_.size_value(dtype, size); }
    int random_offset() override { throw InternalError("an activation draws no random value"); }
    Lowering& l_;
  } builder(*this);
  for (int64_t dir = 0; dir < d.directions; ++dir)
    for (int64_t f = 0; f < d.functions(); ++f) {
      Instr arg;
      arg.op = Op::RecurrenceArg;
      arg.dtype = t;
      arg.axis = static_cast<int>(dir * d.functions() + f);
      Instr result = arg;
      result.op = Op::RecurrenceResult;
      result.args = {recurrence_activation(n, dir, f, builder, t, emit(std::move(arg)))};
      emit(std::move(result));
    }
}

}  // namespace tcc::lowering
