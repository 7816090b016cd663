// RoiAlign kernels: a tcc::RoiAlign node, lowered to its RoiAlignDesc
// (lowering.h, kernel_ir.h).
#include "codegen/lowering.h"

namespace tcc::lowering {

void Lowering::setup_roi_align(const Node& n) {
  k_.kind = kir::Kind::RoiAlign;
  if (body_.nodes().size() != 1) fail(&n, "is lowered only as a kernel of its own");
  for (const Value* v : n.inputs())
    if (v == nullptr || !is_body_input(v)) fail(&n, "an operand is not a body input");
  // tcc::RoiAlign spells every attribute (decompose_roi_align), so no opset default applies.
  kir::RoiAlignDesc d;
  d.max = n.get_string("mode", "avg") == "max";
  d.half_pixel = n.get_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  d.sampling_ratio = n.get_int("sampling_ratio", 0);
  d.spatial_scale = n.get_float("spatial_scale", 1.0f);
  d.x = input_buffer(n.input(0));
  d.rois = input_buffer(n.input(1));
  d.batch_indices = input_buffer(n.input(2));
  for (size_t j = 0; j < body_.outputs().size(); ++j)
    if (body_.outputs()[j] == n.output(0)) d.y = static_cast<int>(fusion_.num_inputs() + j);
  if (d.y < 0) fail(&n, "does not export its output");
  k_.domain = shape_of(n.output(0));
  k_.roi_align = d;
}

}  // namespace tcc::lowering
