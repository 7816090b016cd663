// NMS kernels: a tcc::NmsSelect node, lowered to its NmsDesc (lowering.h,
// kernel_ir.h).
#include <iterator>
#include <vector>

#include "codegen/lowering.h"

namespace tcc::lowering {

void Lowering::setup_nms(const Node& n) {
  k_.kind = kir::Kind::Nms;
  if (body_.nodes().size() != 1) fail(&n, "is lowered only as a kernel of its own");
  for (const Value* v : n.inputs())
    if (v != nullptr && !is_body_input(v)) fail(&n, "an operand is not a body input");
  kir::NmsDesc d;
  d.center = n.get_int("center_point_box", 0) == 1;
  const std::vector<SymExpr> scores = shape_of(n.input(1));
  d.boxes = scores[2];
  // boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold: the node's inputs in order.
  int* inputs[] = {&d.box_data, &d.scores, &d.max_output, &d.iou_threshold, &d.score_threshold};
  for (size_t i = 0; i < n.num_inputs() && i < std::size(inputs); ++i)
    if (n.input(i) != nullptr) *inputs[i] = input_buffer(n.input(i));
  int* outputs[] = {&d.selected, &d.count};
  for (size_t j = 0; j < body_.outputs().size(); ++j)
    for (size_t o = 0; o < n.num_outputs(); ++o)
      if (body_.outputs()[j] == n.output(o)) *outputs[o] = static_cast<int>(fusion_.num_inputs() + j);
  if (d.selected < 0 || d.count < 0) fail(&n, "does not export both its selection and its count");
  k_.domain = {scores[0], scores[1]};
  k_.nms = d;
}

}  // namespace tcc::lowering
