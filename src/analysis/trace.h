// The call trace `tcc explain --trace` simulates, and the model signature the
// trace is checked against.
//
// A trace is JSON Lines, one call per line, mapping each model input to a
// tensor {"shape": [8, 24], "dtype": "float32"} or a scalar {"scalar": 0.0033}
// (a JSON integer is an int scalar, true/false a bool scalar). Identical lines
// are parsed once; a million-line trace of a training loop has few distinct
// calls (except for float scalars that change every step).
//
// Sizes are tracked per dim class: the dims of the model's inputs that the
// model says are equal (the same dim_param) form one class, each int scalar
// input is a class of its own, and static dims are fixed by the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/ir/graph.h"
#include "src/shape/shape_inference.h"

namespace tcc {

struct InputSignature {
  std::string name;
  DType dtype = DType::Undefined;          // Undefined: the model does not say
  bool scalar_slot = false;                // rank 0: takes {"scalar": v} or a 0-d tensor
  std::vector<std::optional<int64_t>> fixed;  // per dim: the size the model fixes, if any
  std::vector<int> dim_class;                 // per dim: its class (-1 for a fixed dim)
  int scalar_class = -1;                      // class of an int scalar's value
};

// A fact an op's lowering relies on: `expr % modulus == 0` over class values.
struct DivisibilityFact {
  SymExpr expr;  // over the model's symbol names
  int64_t modulus = 1;
  std::string node;  // the node that needs it
};

struct ModelSignature {
  std::vector<InputSignature> inputs;
  std::vector<std::string> class_symbol;                 // per class: the model's name for it
  std::vector<std::vector<std::pair<int, int>>> class_sources;  // per class: (input, dim); dim -1 for a scalar
  std::vector<DivisibilityFact> facts;
  int num_classes() const { return static_cast<int>(class_symbol.size()); }
  int find_input(std::string_view name) const;
  // "x.size()[1]" or "n" for a class source.
  std::string source_str(int input, int dim) const;
};

// Builds the signature of g's inputs (types after infer_shapes) and the
// divisibility facts its Reshapes rely on.
ModelSignature build_signature(const Graph& g, const ShapeInfo& info);

enum class EntryKind : uint8_t { Absent, Tensor, FloatScalar, IntScalar, BoolScalar };

// One distinct call: per input its kind, dtype, float value; per class its value.
struct CallRecord {
  std::vector<EntryKind> kinds;
  std::vector<DType> dtypes;
  std::vector<double> floats;     // float and bool scalars' values
  std::vector<int64_t> class_values;  // size or int scalar value per class
};

struct Trace {
  std::string file;
  std::vector<CallRecord> distinct;
  std::vector<uint32_t> calls;  // per call (trace order): index into distinct
};

// Reads and validates a trace. A malformed line or an entry that contradicts
// the model (unknown or missing input, dtype, rank, a fixed dim, dims the model
// declares equal, a divisibility fact) is an InputError naming file, line,
// input, expected and actual.
Trace read_trace(const std::string& path, const ModelSignature& sig);
Trace parse_trace(std::string_view text, const std::string& file, const ModelSignature& sig);

// The trace's spelling of a dtype ("float32", "int64", ...).
std::string torch_dtype_name(DType t);
// Shortest text that reads back as v (what Python's repr prints).
std::string format_float(double v);

}  // namespace tcc
