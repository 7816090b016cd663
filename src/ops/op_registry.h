// The op registry: for each supported op, its shape rule, its reference
// (CPU interpreter) kernel, its traits, its kernel role, its decomposition and
// its gradient rule.
//
// One OpDef per (domain, op_type). Behaviour that changed across opsets
// (Reduce* axes as an input from 18, Split's num_outputs, ...) is handled
// inside the rule and kernel by reading node.opset(). Ops are registered by
// family, one file per family under src/ops/, from register_all_ops().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/ir/graph.h"
#include "src/ir/shape_env.h"
#include "src/ops/decomposition.h"
#include "src/ops/gradient.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/pointwise.h"

namespace tcc {

class Interpreter;

// What passes and explain need to know about an op without running it.
enum OpTrait : uint32_t {
  kPointwise = 1u << 0,           // output[i] depends only on inputs[i] (after broadcasting)
  kReduction = 1u << 1,           // reduces along axes (sums, softmax, layernorm, argmax, ...)
  kContraction = 1u << 2,         // MatMul, Gemm, Conv, Einsum: library or template kernels
  kMovement = 1u << 3,            // reshapes, transposes, slices, gathers: moves data only
  kShapeOnly = 1u << 4,           // output depends on input shapes only (Shape, Size)
  kDataDependentShape = 1u << 5,  // output shape depends on input values (NonZero, Unique, ...)
  kControlFlow = 1u << 6,         // If, Loop, Scan
  kRandom = 1u << 7,              // Dropout in training mode, random generators
  kConstant = 1u << 8,            // Constant, ConstantOfShape: no tensor inputs read
  kNonTensor = 1u << 9,           // sequence or optional values: a graph break, compiled where their structure is known
  kZeroFloor = 1u << 10,          // max(x, 0): redundant before a quantization whose zero point is its type's
                                  // lowest value, which saturates alike (passes/fuse_qdq.cc drops it there)
  kWindow = 1u << 11,             // slides a window over its input (pools, Conv): a node of the Indexed role is
                                  // an unrolled window, which may lead a pointwise kernel (passes/fuse.cc)
  kTargetDType = 1u << 12,        // its output's dtype is a target's (Cast's `to`, CastLike's second input),
                                  // not that of the data it reads: autocast never lowers it
  kTransposedOperands = 1u << 13, // a matrix product whose library call reads an operand transposed in place (its
                                  // transpose flag): its group takes a Transpose only it reads (passes/fuse.cc)
  kRearranges = 1u << 14,         // each output element is an element of its data input (input 0), moved, repeated
                                  // or left out, none computed or filled in (reshapes, transposes, broadcasts,
                                  // slices, gathers): passes/fuse_attention.cc reads a mask's values through it
  kReshape = 1u << 15,            // its output is its data input's elements in the same row-major order, only the
                                  // shape new (Reshape, Flatten, Squeeze, Unsqueeze): is_reshape (kernel_roles.h)
};

// The library calls whose epilogue can apply a node as the activation after
// their product (OpDef::epilogues).
enum LibraryEpilogue : uint32_t {
  kGemmEpilogue = 1u << 0,  // cuBLASLt's, after a MatMul or Gemm
  kConvEpilogue = 1u << 1,  // cuDNN's, after a Conv
};

// How data decides the regions a control-flow op runs (If's branch, Loop's
// trips): explain's data_dependent_control_flow break, OpDef::region_choice.
struct RegionChoice {
  std::string what;  // what decides, as explain names it: "condition", "trip count or condition"
  // The operand that decides, where `known` (a compile-time constant) fails
  // for it; null when the host knows what runs.
  std::function<const Value*(const Node&, const std::function<bool(const Value*)>& known)> data_operand;
};

// Constant folding runs the reference kernel; beyond this many output elements
// folding would only bloat the model, so the value stays a runtime value.
constexpr int64_t kMaxFoldElements = 1 << 16;

// What a shape rule sees of one node: input types, constant inputs, symbolic
// contents of small integer tensors (the values flowing through exporters'
// Shape -> Gather -> Concat -> Reshape chains), and the ShapeEnv.
class InferContext {
 public:
  InferContext(const Node& node, ShapeEnv& env, std::vector<Type> input_types,
               std::vector<const Tensor*> input_consts, std::vector<const Dims*> input_values,
               std::function<std::vector<Type>(const Graph&, const std::vector<Type>&)> infer_region);

  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset(); }
  ShapeEnv& env() { return env_; }
  size_t num_inputs() const { return input_types_.size(); }
  bool has_input(size_t i) const { return node_.has_input(i); }
  // Type of input i (an unknown Type when the input is absent).
  const Type& input_type(size_t i) const;
  // Input i as a tensor type whose rank is known; fails with a message naming the node otherwise.
  const Type& ranked_input(size_t i) const;
  // Constant data of input i when it is known at compile time (initializer, Constant, folded).
  const Tensor* input_const(size_t i) const;
  // Symbolic contents of a rank-0 or rank-1 integer input: one Dim per element.
  // Derived from a constant when there is one. Null when unknown.
  const Dims* input_values(size_t i) const;

  size_t num_outputs() const { return node_.num_outputs(); }
  void set_output_type(size_t i, Type t);
  // Records the symbolic contents of a rank-0/1 integer output.
  void set_output_values(size_t i, Dims v);
  // Records that output i is a compile-time constant.
  void set_output_const(size_t i, Tensor t);

  // Infers the output types of a region called with the given input types.
  std::vector<Type> infer_region(const Graph& g, const std::vector<Type>& inputs) const {
    return infer_region_(g, inputs);
  }

  [[noreturn]] void fail(const std::string& msg) const { node_.fail(msg); }

  // Filled by the setters; read by the shape engine.
  std::vector<Type> out_types;
  std::vector<std::unique_ptr<Dims>> out_values;
  std::vector<std::unique_ptr<Tensor>> out_consts;

 private:
  const Node& node_;
  ShapeEnv& env_;
  std::vector<Type> input_types_;
  std::vector<const Tensor*> input_consts_;
  std::vector<const Dims*> input_values_;
  mutable std::vector<std::unique_ptr<Dims>> derived_values_;
  std::function<std::vector<Type>(const Graph&, const std::vector<Type>&)> infer_region_;
};

// What a reference kernel sees: the node and its input tensors.
class EvalContext {
 public:
  EvalContext(const Node& node, std::vector<const Tensor*> inputs, Interpreter& interp)
      : node_(node), inputs_(std::move(inputs)), interp_(interp) {}
  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset(); }
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // Input i; fails naming the node when it is absent.
  const Tensor& input(size_t i) const;
  size_t num_outputs() const { return node_.num_outputs(); }
  // Runs a region (If/Loop/Scan body) with the given inputs; it may read the
  // values visible at this node.
  std::vector<Tensor> run_region(const Graph& g, const std::vector<Tensor>& inputs);
  // Symbol values bound from the graph inputs' shapes when the run started.
  const std::map<std::string, int64_t>& symbols() const;
  // The random offset the run draws at (Interpreter::random_offset).
  uint64_t random_offset() const;
  [[noreturn]] void fail(const std::string& msg) const { node_.fail(msg); }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  Interpreter& interp_;
};

// How --precision fp16 / bf16 treats an op's float operands (passes/autocast.cc),
// as torch.autocast's op lists do.
enum class AutocastClass {
  Follow,  // computes in its inputs' dtype (most ops)
  Low,     // a matrix product, convolution or attention: low-precision operands, f32 accumulation
  F32,     // numerically sensitive (softmax, norms, sums, exp and log, losses): f32 operands
};

using InferFn = std::function<void(InferContext&)>;
using EvalFn = std::function<std::vector<Tensor>(EvalContext&)>;
// Why a node gets no generated kernel or library call although its op has a
// kernel role, or "" when it gets one.
using KernelRefusal = std::function<std::string(const Node&)>;

struct OpDef {
  std::string domain;  // "" for the ONNX default domain
  std::string op_type;
  int64_t since_version = 1;  // oldest opset this definition handles
  uint32_t traits = 0;
  InferFn infer;
  EvalFn eval;
  // Element types the op supports; empty means any.
  std::vector<DType> dtypes;
  // The role a node of the op takes in a generated kernel (kernel_roles.h),
  // given its attributes, dtypes and constant arguments; unset: none (a
  // library call of its own, or the host).
  std::function<KernelRole(const Node&)> kernel = nullptr;
  // The role `kernel` gives the nodes it does not refuse.
  KernelRole declared_role = KernelRole::None;
  // Why `kernel` refuses a node, where the arguments or attributes say (a
  // computed target shape, an integer product, a window cuDNN cannot
  // express): what a fallback step's message adds (kernel_refusal). Unset:
  // nothing more to say than that the node gets no kernel.
  KernelRefusal refusal = nullptr;
  // The scalar expression of an op whose nodes take the Pointwise role.
  PointwiseFn pointwise = nullptr;
  // The gradient rule (gradient.h); unset: tcc does not differentiate the op.
  GradRule grad = nullptr;
  // Where the rule covers a node (every node when unset); elsewhere autodiff
  // differentiates the decomposition's pieces.
  GradApplies grad_applies = nullptr;
  // What autodiff does to a node the rule covers first (gradient.h); unset: nothing.
  SaveForGradient save_for_gradient = nullptr;
  // The ops a node is rewritten into before fusion (decomposition.h); unset:
  // the op is lowered as it is.
  DecomposeFn decompose = nullptr;
  // Whether autodiff differentiates the op through its decomposition's pieces
  // (it has no rule of its own), checked against finite differences like a rule.
  bool grad_by_decomposition = false;
  // Its class under autocast.
  AutocastClass autocast = AutocastClass::Follow;
  // Under autocast, the inputs of a node left in their dtype, parameters
  // rather than data in the node's (Resize's roi and scales, an attention
  // backward's row statistics), and the outputs that stay f32 whatever it
  // computes in (an attention's log-sum-exp, its backward's row statistics);
  // unset: none.
  std::function<bool(const Node&, size_t input)> autocast_keeps = nullptr;
  std::function<bool(const Node&, size_t output)> f32_output = nullptr;
  // Inputs that configure the op rather than carry data a gradient flows
  // through (BatchNormalization's running statistics, Resize's roi, scales
  // and sizes, Dropout's ratio, Range's bounds): autodiff differentiates
  // nothing through them, and a float value only they read is no parameter.
  std::vector<size_t> config_inputs = {};
  // Inputs of a node of the Indexed role that its kernel takes as literals
  // when they are constant (Pad's pads, fill and axes, CumSum's axis); its
  // other inputs are buffers the kernel indexes (passes/fuse.cc).
  std::vector<size_t> literal_inputs = {};
  // A binary op whose two operands commute (canonicalize moves a constant one to the right).
  bool commutative = false;
  // The library calls whose epilogue applies a node of the op as their
  // activation (LibraryEpilogue bits; passes/fuse.cc grows a GEMM's or
  // convolution's group by such a node, the lowering names `activation` in
  // the call), for the nodes `epilogue_refusal` does not refuse (every node
  // when unset; it says what such a node is: "an erf Gelu; ...").
  uint32_t epilogues = 0;
  std::string activation = "";  // as the module's library calls name it: "relu", "gelu_tanh"
  KernelRefusal epilogue_refusal = nullptr;
  // Inputs whose values set the output's shape (Reshape's shape, Slice's
  // bounds, TopK's k): the host must know them, so one computed from tensor
  // data makes the output's shape data-dependent (explain's partition).
  std::vector<size_t> shape_inputs = {};
  // Of a control-flow op whose regions run as data decides (If, Loop).
  std::optional<RegionChoice> region_choice = std::nullopt;
  // What explain suggests instead of a node of the op that breaks the graph
  // (a data-dependent size, a choice of regions); "": the break reason's own hint.
  std::string break_hint = "";

  bool has(OpTrait t) const { return (traits & t) != 0; }
  // A kernel role for nodes where `applies` holds (every node when unset).
  OpDef& kernel_role(KernelRole role, std::function<bool(const Node&)> applies = nullptr);
  // Role `declared` or None, as `role` decides per node.
  OpDef& kernel_role(KernelRole declared, std::function<KernelRole(const Node&)> role);
  // Role `role` for the nodes `why` does not refuse (and `applies` accepts,
  // where given); `why` is the op's refusal.
  OpDef& kernel_unless(KernelRole role, KernelRefusal why, std::function<bool(const Node&)> applies = nullptr);
  // Role `declared` or None, as `role` decides per node, for the nodes `why`
  // does not refuse; `why` is the op's refusal.
  OpDef& kernel_unless(KernelRole declared, KernelRefusal why, std::function<KernelRole(const Node&)> role);
  // The Pointwise role, for nodes where `applies` holds, computed by `f`.
  OpDef& pointwise_kernel(PointwiseFn f, std::function<bool(const Node&)> applies = nullptr);
  OpDef& gradient(GradRule rule, GradApplies applies = nullptr, SaveForGradient save = nullptr);
  OpDef& decomposition(DecomposeFn f);
  // Marks an op whose decomposition autodiff differentiates (grad_by_decomposition).
  OpDef& trains_through_decomposition();
  OpDef& under_autocast(AutocastClass a);
  // The inputs autocast leaves and the outputs that stay f32 (autocast_keeps, f32_output; either may be unset).
  OpDef& keeps_under_autocast(std::function<bool(const Node&, size_t)> inputs,
                              std::function<bool(const Node&, size_t)> f32_outputs);
  OpDef& configured_by(std::vector<size_t> inputs);
  OpDef& literals_at(std::vector<size_t> inputs);
  OpDef& commutes();
  // The activation `name` that the `libraries`' epilogues apply, for the nodes `why` does not refuse.
  OpDef& library_epilogue(uint32_t libraries, std::string name, KernelRefusal why = nullptr);
  OpDef& with_trait(OpTrait t);
  // The inputs whose values set the output's shape (shape_inputs).
  OpDef& shape_from_inputs(std::vector<size_t> inputs);
  OpDef& regions_chosen_by(RegionChoice choice);
  OpDef& hint_at_break(std::string hint);
};

// How a compiled module runs the op's nodes on the GPU (what `tcc ops`
// reports): "library" (cuBLASLt, cuDNN), "kernel" (a generated kernel, its own
// or, decomposed, its pieces'), or "host" (the reference kernel on the CPU, a
// host step). Nodes whose arguments a kernel refuses run on the host as well.
const char* gpu_path(const OpDef& def);

class OpRegistry {
 public:
  // The registry with every family registered (built once, thread-safe).
  static const OpRegistry& get();

  // Registers def; the returned definition stays where it is, so a family may
  // go on filling it in (kernel_role, pointwise_kernel, gradient).
  OpDef& add(OpDef def);
  // The definition for a node's op, or null when tcc does not know the op, its
  // domain, or its opset version is older than since_version.
  const OpDef* lookup(const std::string& domain, const std::string& op_type, int64_t opset) const;
  const OpDef* lookup(const Node& n) const { return lookup(n.domain(), n.op_type(), n.opset()); }
  // Why lookup(n) failed, as a sentence ("unknown op 'Foo' in domain ''", ...).
  std::string why_unsupported(const Node& n) const;
  std::vector<const OpDef*> all() const;

 private:
  std::unordered_map<std::string, OpDef> defs_;  // key: domain + "::" + op_type
};

// Whether input i of n configures its op (OpDef::config_inputs).
bool config_input(const Node& n, size_t i);
// Whether input i of n is one its op's kernel takes as a literal when constant (OpDef::literal_inputs).
bool kernel_literal_input(const Node& n, size_t i);

}  // namespace tcc
