// RNN, GRU and LSTM (src/ops/recurrent.cc) as the persistent recurrence
// kernel (codegen/recurrence_template.h) sees them: the tcc::Recurrence node
// that their decomposition leaves for a long or symbolic sequence, after the
// input projection X W^T + Wb of every step (one MatMul).
//
// tcc::Recurrence(XW, R, B, sequence_lens, initial_h, initial_c, P) -> Y, Y_h, Y_c
// runs the recurrence of its `cell` attribute ("RNN", "GRU", "LSTM") with the
// ONNX op's other attributes, in layout 0: XW [seq, batch, dirs * gates *
// hidden] (direction d's gates side by side), R, B and P as the ONNX op's (B's
// Wb half unread), the states [dirs, batch, hidden], Y [seq, dirs, batch,
// hidden]; every float operand in one dtype, f32 or f64. A length outside
// [0, seq] is taken as the nearer bound (the ONNX ops refuse one). RNN and
// GRU nodes have no initial_c, P or Y_c.
#pragma once

#include <cstdint>
#include <optional>

#include "src/ir/dtype.h"
#include "src/ops/pointwise.h"

namespace tcc {

class Node;

enum class RecurrentCell { Rnn, Gru, Lstm };
// Row blocks of W and R: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c).
constexpr int64_t recurrent_gates(RecurrentCell c) {
  return c == RecurrentCell::Rnn ? 1 : c == RecurrentCell::Gru ? 3 : 4;
}
// Activations per direction: RNN 1 (f), GRU 2 (f, g), LSTM 3 (f, g, h).
constexpr int64_t recurrent_functions(RecurrentCell c) { return static_cast<int64_t>(c) + 1; }

// A tcc::Recurrence node's attributes, with the ONNX op's defaults.
struct RecurrenceAttrs {
  RecurrentCell cell = RecurrentCell::Rnn;
  int64_t directions = 1;  // 2 when bidirectional (direction 1 runs backward)
  bool reverse = false;    // direction "reverse"
  int64_t hidden = 1;
  std::optional<double> clip;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
};
RecurrenceAttrs recurrence_attrs(const Node& n);

// Activation `f` (of the cell's functions) of direction d of recurrence node
// n at x, built with b in dtype t from the same table the reference kernel
// and the unrolled decomposition read (its clip not included).
int recurrence_activation(const Node& n, int64_t d, int64_t f, ScalarBuilder& b, DType t, int x);

// The persistent kernel keeps, per (direction, batch row), h (and c), one
// step's gate sums h R^T + Rb and GRU's r * h in shared memory: this many
// elements of the compute dtype, which must fit kRecurrenceSharedBytes.
int64_t recurrence_shared_elements(RecurrentCell cell, int64_t hidden, bool linear_before_reset);
inline constexpr int64_t kRecurrenceSharedBytes = 48 * 1024;  // CUDA's static shared memory per block

}  // namespace tcc
