// One registration function per op family; each lives in src/ops/<family>.cc.
#pragma once

namespace tcc {
class OpRegistry;

void register_elementwise_ops(OpRegistry& r);     // arithmetic, Neg, Abs, Sign, Relu, comparisons, logic, Cast, Where, Clip
void register_unary_float_ops(OpRegistry& r);     // float math functions, activations, IsNaN, IsInf
void register_bitwise_ops(OpRegistry& r);         // BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, BitShift
void register_reduce_ops(OpRegistry& r);          // Reduce*
void register_reduction_ops(OpRegistry& r);       // ArgMax/ArgMin, Softmax, LogSoftmax, Hardmax, LayerNorm, CumSum
void register_linalg_ops(OpRegistry& r);          // MatMul, MatMulInteger, Gemm, Det
void register_einsum_ops(OpRegistry& r);          // Einsum
void register_attention_ops(OpRegistry& r);       // Attention
void register_attention_grad_ops(OpRegistry& r);  // tcc::AttentionGrad
void register_rotary_embedding_ops(OpRegistry& r);  // RotaryEmbedding
void register_shape_ops(OpRegistry& r);           // Shape, Size, Reshape, Squeeze, Unsqueeze, Flatten, Identity, Dropout, Constant, ConstantOfShape, Range
void register_movement_ops(OpRegistry& r);        // Transpose, Slice, Split, Concat, Expand, Pad, tcc::Pad
void register_rearrange_ops(OpRegistry& r);       // Tile, Trilu, DepthToSpace, SpaceToDepth
void register_gather_scatter_ops(OpRegistry& r);  // Gather, GatherElements, GatherND, ScatterElements, ScatterND, Compress
void register_conv_pool_ops(OpRegistry& r);       // Conv, MaxPool, AveragePool, LpPool, global pools (GlobalLpPool)
void register_conv_transpose_ops(OpRegistry& r);  // ConvTranspose
void register_normalization_ops(OpRegistry& r);   // Batch-, Instance-, Group-, RMS-, LpNormalization, MVN, LRN
void register_resize_ops(OpRegistry& r);          // Resize
void register_loss_ops(OpRegistry& r);            // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_data_dependent_ops(OpRegistry& r);  // NonZero, Unique, TopK
void register_control_flow_ops(OpRegistry& r);    // If, Loop, Scan
void register_recurrent_ops(OpRegistry& r);       // RNN, GRU, LSTM
void register_signal_ops(OpRegistry& r);          // DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix
void register_quantization_ops(OpRegistry& r);    // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv, ConvInteger
void register_spatial_ops(OpRegistry& r);        // AffineGrid, Col2Im, MaxUnpool, CenterCropPad
void register_sampling_ops(OpRegistry& r);       // GridSample, DeformConv
void register_detection_ops(OpRegistry& r);      // RoiAlign, MaxRoiPool, NonMaxSuppression
void register_tcc_ops(OpRegistry& r);             // tcc::Fusion, tcc::Reshape, tcc::Expand, tcc::Slice
void register_sequence_ops(OpRegistry& r);        // Sequence*, ConcatFromSequence, SplitToSequence, Optional*
void register_text_ops(OpRegistry& r);            // TfIdfVectorizer, StringConcat
void register_generator_ops(OpRegistry& r);       // OneHot, EyeLike, RandomNormal, RandomUniform, *Like, Bernoulli, Multinomial

}  // namespace tcc
