// One registration function per op family; each lives in src/ops/<family>.cc.
#pragma once

namespace tcc {
class OpRegistry;

void register_elementwise_ops(OpRegistry& r);     // unary/binary math, comparisons, logic, Cast, Where, Clip
void register_reduction_ops(OpRegistry& r);       // Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax, LayerNorm, CumSum
void register_linalg_ops(OpRegistry& r);          // MatMul, Gemm, Einsum
void register_shape_ops(OpRegistry& r);           // Shape, Size, Reshape, Squeeze, Unsqueeze, Flatten, Constant, ConstantOfShape, Range, Identity
void register_movement_ops(OpRegistry& r);        // Transpose, Gather*, Slice, Split, Concat, Expand, Tile, Pad, Trilu
void register_nn_ops(OpRegistry& r);              // Conv*, pools, BatchNorm, Resize, Dropout, losses
void register_data_dependent_ops(OpRegistry& r);  // NonZero, Unique, TopK
void register_control_flow_ops(OpRegistry& r);    // If, Loop, Scan
void register_tcc_ops(OpRegistry& r);             // tcc::Fusion, tcc::Reshape, tcc::Expand, tcc::Slice

}  // namespace tcc
