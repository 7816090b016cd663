// The call trace `tcc explain --trace` simulates, and the model signature the
// trace is checked against.
//
// A trace is JSON Lines, one call per line, mapping each model input to a
// tensor {"shape": [8, 24], "dtype": "float32"} (optionally with
// "requires_grad": true, "device": "cuda:0", "stride": [1, 8]) or a scalar
// {"scalar": 0.0033} (a JSON integer is an int scalar, true/false a bool scalar). Equal calls are
// stored once: a million-line trace of a training loop has few distinct calls
// (except for float scalars that change every step), and the distinct ones
// live in flat arrays rather than a million small vectors.
//
// Sizes are tracked per dim class: the dims of the model's inputs that the
// model says are equal (the same dim_param) form one class, each int scalar
// input is a class of its own, and static dims are fixed by the model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  // How torch's guards name the input where it is not a local of the frame by
  // its name, an attribute path from one ("self.param_groups[0]['lr']"); empty otherwise.
  std::string source;
};

// A fact an op relies on, over class values. Divisible: `expr % value == 0`
// (a Reshape's inferred dim), which every valid call meets, so a trace call
// that breaks it is an error. AtLeast: `expr >= value` (a Slice bound written
// as a plain index lies within its symbolic dim, as shape inference takes it),
// which a valid call may break: the compiled graph's guard refuses it.
struct ShapeFact {
  enum class Kind { Divisible, AtLeast };
  Kind kind = Kind::Divisible;
  SymExpr expr;  // over the model's symbol names
  int64_t value = 1;
  std::string node;  // the node that needs it

  // expr at these symbol values when they break the fact; nullopt when it holds
  // (or expr does not evaluate).
  std::optional<int64_t> broken_at(const std::map<std::string, int64_t>& symbols) const;
};

// The sizes an exported program accepts for one of its symbols (a .pt2's
// range_constraints): at least min, and at most max where bounded.
struct SizeRange {
  int64_t min = 0;
  std::optional<int64_t> max;
  // Whether the program accepts size v, as torch.export's input check does:
  // the minimum binds only above 2 (0 and 1 pass whatever the range says).
  bool admits(int64_t v) const { return (min <= 2 || v >= min) && (!max || v <= *max); }
  std::string str() const { return "[" + std::to_string(min) + ", " + (max ? std::to_string(*max) : "inf") + "]"; }
};

// The least size torch.compile gives a symbol: it specializes sizes 0 and 1.
constexpr int64_t kTorchLeastSymbolicSize = 2;

struct ModelSignature {
  std::vector<InputSignature> inputs;
  std::vector<std::string> class_symbol;                 // per class: the model's name for it
  std::vector<std::vector<std::pair<int, int>>> class_sources;  // per class: (input, dim); dim -1 for a scalar
  std::vector<ShapeFact> facts;
  std::map<int, SizeRange> class_ranges;  // per class the model declares a range for
  // The least size a symbolic class takes: torch.compile's in explain's
  // simulation; 1 for a compiled module, whose kernels take any positive
  // size. The facts leave out what holds from it.
  int64_t least_size = kTorchLeastSymbolicSize;
  int num_classes() const { return static_cast<int>(class_symbol.size()); }
  // The class symbols bound to one call's class values.
  std::map<std::string, int64_t> symbol_values(const int64_t* class_values) const;
  int find_input(std::string_view name) const;
  // "x.size()[1]" or "n" for a class source.
  std::string source_str(int input, int dim) const;
};

// Dim `dim` of the input spelled `name`, as torch's guards write it:
// "x.size()[1]", or the name itself for a scalar (dim -1).
std::string size_source(const std::string& name, int dim);

// Builds the signature of g's inputs (types after infer_shapes), each
// symbolic size at least `least_size`, and the facts its Reshapes, Slices and
// Squeezes rely on.
ModelSignature build_signature(const Graph& g, const ShapeInfo& info, int64_t least_size);

// The ranges a model's metadata declares for its symbols ("pt2.range.s23" =
// "[2, 64]", "[2, inf]" unbounded: what the .pt2 frontend keeps of
// range_constraints), onto the classes of those symbols. A range that cannot
// be read is an InputError naming the model file.
void read_size_ranges(ModelSignature& sig, const std::map<std::string, std::string>& metadata,
                      const std::string& file);

enum class EntryKind : uint8_t { Absent, Tensor, FloatScalar, IntScalar, BoolScalar };

// What a tensor entry says beyond its shape and dtype, which torch's
// TENSOR_MATCH guards as well: "requires_grad", "device" ("" when the trace
// does not say) and "stride" (empty: contiguous for its shape).
struct TensorLayout {
  bool requires_grad = false;
  std::string device;
  std::vector<int64_t> strides;
  bool operator==(const TensorLayout&) const = default;
};

// One distinct call, viewed in its trace's arrays: per input its kind, dtype
// and float value; per class its value.
struct CallRecord {
  const EntryKind* kinds;
  const DType* dtypes;
  const double* floats;         // float and bool scalars' values
  const int64_t* class_values;  // size or int scalar value per class (-1: no input gives it)
  const uint32_t* layouts;      // per input: its TensorLayout in layout_table
  const std::vector<TensorLayout>* layout_table;
  const TensorLayout& layout(int input) const { return (*layout_table)[layouts[input]]; }
  bool grad_mode = true;  // torch.is_grad_enabled() at the call (GLOBAL_STATE)
};

// The distinct calls as rows of struct-of-arrays storage: row r holds
// kinds/dtypes/floats/layouts[r * num_inputs ...] and class_values[r * num_classes ...].
// Layouts are interned: a trace has few, and layout_table[0] is the default.
struct Trace {
  std::string file;
  size_t num_inputs = 0;
  size_t num_classes = 0;
  size_t distinct_count = 0;
  std::vector<EntryKind> kinds;
  std::vector<DType> dtypes;
  std::vector<double> floats;
  std::vector<int64_t> class_values;
  std::vector<uint32_t> layouts;
  std::vector<TensorLayout> layout_table = {TensorLayout{}};
  std::vector<uint8_t> grad_modes;  // per row: whether grad mode was on
  std::vector<uint32_t> calls;  // per call (trace order): its row

  CallRecord distinct(uint32_t row) const {
    return {kinds.data() + row * num_inputs, dtypes.data() + row * num_inputs, floats.data() + row * num_inputs,
            class_values.data() + row * num_classes, layouts.data() + row * num_inputs, &layout_table,
            grad_modes[row] != 0};
  }
};

// Reads and validates a trace. A malformed line or an entry that contradicts
// the model (unknown or missing input, dtype, rank, a fixed dim, dims the model
// declares equal, a Divisible fact) is an InputError naming file, line,
// input, expected and actual.
Trace read_trace(const std::string& path, const ModelSignature& sig);
Trace parse_trace(std::string_view text, const std::string& file, const ModelSignature& sig);

// Shortest text that reads back as v (what Python's repr prints).
std::string format_float(double v);

}  // namespace tcc
