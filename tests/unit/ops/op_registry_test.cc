// What the op registry says of each op holds together: each pointwise
// expression builds, for a node of its op, what the lowering can emit, and the
// facts an OpDef gathers (role, expression, refusal, library epilogues,
// decomposition, autocast class, commutativity, the non-tensor trait, what
// rearranges or reshapes its data, the inputs that set a shape, what chooses a control-flow op's regions, the
// inputs that configure an op or that its kernel takes as literals, what
// autocast leaves) agree with one another.
#include <gtest/gtest.h>

#include <onnx/defs/schema.h>

#include <algorithm>
#include <set>

#include "src/ir/graph.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// Records what a pointwise expression asks of the lowering.
struct CountingBuilder : ScalarBuilder {
  int op(ScalarOp, DType, std::vector<int> args) override {
    for (int a : args) EXPECT_TRUE(a >= 0 && a < next) << "an operand that was never built";
    return next++;
  }
  int constant(DType, double) override { return next++; }
  int coordinate(const Node&, int) override { return next++; }
  int size(DType, const SymExpr&) override { return next++; }
  int random_offset() override { return next++; }
  int next = 0;
};

TEST(OpRegistry, PointwiseExpressionsBuildForTheirOps) {
  int checked = 0;
  for (const OpDef* def : OpRegistry::get().all()) {
    if (!def->pointwise) continue;
    EXPECT_TRUE(def->kernel) << def->op_type << " has a kernel expression but no kernel role";
    Graph g;
    g.set_opset(def->domain, 20);
    std::vector<Value*> inputs;
    size_t arity = def->op_type == "Where" ? 3 : 2;
    for (size_t i = 0; i < arity; ++i)
      inputs.push_back(g.add_input("x" + std::to_string(i), Type::tensor(DType::F32, {Dim(4)})));
    Node* n = g.add_node(def->op_type, inputs, {"y"}, def->domain, def->op_type);
    n->output(0)->set_type(Type::tensor(DType::F32, {Dim(4)}));
    if (def->op_type == "Size") n->set_attr("dims", Attribute::of_strings({"4"}));
    if (def->op_type == "BitShift") n->set_attr("direction", Attribute::of_string("LEFT"));
    CountingBuilder b;
    b.next = static_cast<int>(arity);
    std::vector<int> in;
    for (size_t i = 0; i < arity; ++i) in.push_back(static_cast<int>(i));
    int result = def->pointwise(*n, b, in);
    EXPECT_TRUE(result >= 0 && result < b.next) << def->op_type << "'s expression returned a value it did not build";
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// What one OpDef says about its op holds together: a kernel expression comes
// with the Pointwise role, training through a decomposition needs one, an
// autocast class is given to float ops, and a commutative op is a pointwise
// binary op with an expression.
TEST(OpRegistry, DefinitionsAgree) {
  int autocast = 0, commutative = 0;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    if (def->pointwise) {
      EXPECT_EQ(def->declared_role, KernelRole::Pointwise) << op;
    }
    if (def->grad_by_decomposition) {
      EXPECT_TRUE(def->decompose) << op << " trains through a decomposition it lacks";
    }
    if (def->autocast != AutocastClass::Follow) {
      ++autocast;
      const bool takes_f32 = def->dtypes.empty() || std::find(def->dtypes.begin(), def->dtypes.end(), DType::F32) !=
                                                       def->dtypes.end();
      EXPECT_TRUE(takes_f32) << op << " has an autocast class but computes no f32";
    }
    if (def->commutative) {
      ++commutative;
      EXPECT_TRUE(def->has(kPointwise) && def->pointwise) << op << " commutes but is not a pointwise op with an expression";
    }
  }
  EXPECT_GE(autocast, 30);
  EXPECT_GE(commutative, 9);
}

// The kernel facts of an OpDef agree: a refusal belongs to an op with a kernel
// role; an op a library epilogue applies is a pointwise op with an
// expression (the fuse pass grows a GEMM or convolution only by pointwise
// nodes); an op on sequences or optionals takes no kernel at all.
TEST(OpRegistry, KernelFactsAgree) {
  std::vector<std::string> refusing, epilogues;
  int non_tensor = 0;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    if (def->refusal) {
      refusing.push_back(def->op_type);
      EXPECT_TRUE(def->kernel && def->declared_role != KernelRole::None) << op << " refuses a kernel role it lacks";
    }
    if (def->epilogues != 0) {
      epilogues.push_back(def->op_type);
      EXPECT_FALSE(def->activation.empty()) << op << " is a library epilogue its calls cannot name";
      EXPECT_EQ(def->declared_role, KernelRole::Pointwise) << op;
      EXPECT_TRUE(def->pointwise) << op << " is a library epilogue without a kernel expression";
      EXPECT_EQ(def->epilogues & ~uint32_t{kGemmEpilogue | kConvEpilogue}, 0u) << op;
    }
    if (def->has(kNonTensor)) {
      ++non_tensor;
      EXPECT_FALSE(def->kernel || def->pointwise || def->refusal || def->epilogues) << op << " works on non-tensors";
    }
    if (def->epilogues == 0) {
      EXPECT_TRUE(def->activation.empty() && !def->epilogue_refusal) << op << " names an activation no library applies";
    }
    if (def->has(kZeroFloor)) {
      EXPECT_TRUE(def->has(kPointwise) && def->pointwise) << op << " floors at zero but is no pointwise op";
    }
  }
  std::sort(refusing.begin(), refusing.end());
  EXPECT_EQ(refusing, (std::vector<std::string>{"AveragePool", "Conv", "Expand", "Gemm", "MatMul", "MaxPool",
                                                "Reshape", "Slice", "TopK"}));
  EXPECT_EQ(epilogues, (std::vector<std::string>{"Gelu", "Relu"}));
  EXPECT_EQ(non_tensor, 12);
}

// What an OpDef says of moving data holds together: an op that rearranges its
// data (fuse_attention reads a mask through it) is a movement op, as is every
// op whose kernel role is an affine view of its data (Movement); an op that
// only reshapes its data (is_reshape) rearranges it and takes the Movement role.
TEST(OpRegistry, MovementFactsAgree) {
  std::vector<std::string> rearranging, reshapes;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    if (def->has(kRearranges)) {
      rearranging.push_back(op);
      EXPECT_TRUE(def->has(kMovement)) << op << " rearranges its data but is no movement op";
    }
    if (def->declared_role == KernelRole::Movement) {
      EXPECT_TRUE(def->has(kRearranges)) << op << " is a view of its data that does not rearrange it";
    }
    if (def->has(kReshape)) {
      reshapes.push_back(op);
      EXPECT_TRUE(def->has(kRearranges)) << op << " reshapes its data but does not rearrange it";
      EXPECT_EQ(def->declared_role, KernelRole::Movement) << op;
    }
  }
  std::sort(rearranging.begin(), rearranging.end());
  std::sort(reshapes.begin(), reshapes.end());
  EXPECT_EQ(rearranging, (std::vector<std::string>{
                             "::Compress", "::DepthToSpace", "::Expand", "::Flatten", "::Gather", "::GatherElements",
                             "::GatherND", "::Identity", "::Reshape", "::ReverseSequence", "::Slice", "::SpaceToDepth",
                             "::Split", "::Squeeze", "::Tile", "::Transpose", "::Unsqueeze", "tcc::Expand",
                             "tcc::Reshape", "tcc::Slice"}));
  EXPECT_EQ(reshapes,
            (std::vector<std::string>{"::Flatten", "::Reshape", "::Squeeze", "::Unsqueeze", "tcc::Reshape"}));

  Graph g;
  g.set_opset("", 17);
  g.set_opset(std::string(kTccDomain), 1);
  Value* x = g.add_input("x", Type::tensor(DType::F32, {Dim(4)}));
  EXPECT_TRUE(is_reshape(*g.add_node("Reshape", {x, x}, {"r"}, "", "r")));
  EXPECT_TRUE(is_reshape(*g.add_node("Reshape", {x}, {"t"}, std::string(kTccDomain), "t")));
  EXPECT_FALSE(is_reshape(*g.add_node("Transpose", {x}, {"p"}, "", "p")));
  EXPECT_FALSE(is_reshape(*g.add_node("Identity", {x}, {"i"}, "", "i")));
}

// What explain's partition reads of an OpDef holds together: the inputs whose
// values set a shape are inputs of ONNX's schema of the op (the linked
// library's newest, where it has one), each listed once, in order; an op whose
// regions data chooses is a control-flow op; a break hint belongs to an op
// that breaks (a data-sized output, regions data chooses).
TEST(OpRegistry, PartitionFactsAgree) {
  std::vector<std::string> shaped, chosen;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    if (!def->shape_inputs.empty()) {
      shaped.push_back(def->op_type);
      const auto* schema = ONNX_NAMESPACE::OpSchemaRegistry::Schema(def->op_type, 23, def->domain);
      if (schema == nullptr) continue;  // an op newer than the ONNX library tcc links (AffineGrid, opset 20)
      const std::vector<size_t>& in = def->shape_inputs;
      EXPECT_TRUE(std::is_sorted(in.begin(), in.end()) && std::adjacent_find(in.begin(), in.end()) == in.end())
          << op << "'s shape inputs are not listed once each, in order";
      // Later opsets append inputs (a Reduce*'s axes at 18, DFT's axis at 20)
      // that the linked library's newest schema may predate: one past its last.
      for (size_t i : in) EXPECT_LE(i, schema->inputs().size()) << op << " has no input " << i;
    }
    if (def->region_choice) {
      chosen.push_back(def->op_type);
      EXPECT_TRUE(def->has(kControlFlow)) << op;
      EXPECT_TRUE(!def->region_choice->what.empty() && def->region_choice->data_operand) << op;
    }
    if (!def->break_hint.empty()) {
      EXPECT_TRUE(def->has(kDataDependentShape) || def->region_choice) << op << " has a hint for a break it never makes";
    }
  }
  std::sort(shaped.begin(), shaped.end());
  EXPECT_EQ(shaped, (std::vector<std::string>{"AffineGrid", "CenterCropPad", "Col2Im", "ConstantOfShape", "DFT",
                                              "Expand", "MaxUnpool", "OneHot", "Pad", "Range", "ReduceL1", "ReduceL2",
                                              "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                                              "ReduceProd", "ReduceSum", "ReduceSumSquare", "Reshape", "Resize", "STFT",
                                              "Slice", "Squeeze", "Tile", "TopK", "Unsqueeze"}));
  std::sort(chosen.begin(), chosen.end());
  EXPECT_EQ(chosen, (std::vector<std::string>{"If", "Loop"}));
}

// The input and dtype facts of an OpDef agree: the inputs that configure an
// op and those its kernel takes as literals are listed once each, in order;
// the former are inputs of ONNX's schema (at opset 17), the latter never the
// data (input 0) of an op that declares the Indexed role; a window op's nodes
// take the Indexed role where the kernel unrolls their window; an op that
// reads a transposed operand in place is a contraction; what autocast leaves
// belongs to an op it changes.
TEST(OpRegistry, InputFactsAgree) {
  std::vector<std::string> configured, literals, windows, transposed, targets, kept;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    for (const std::vector<size_t>* in : {&def->config_inputs, &def->literal_inputs}) {
      if (in->empty()) continue;
      (in == &def->config_inputs ? configured : literals)
          .push_back(def->domain.empty() ? def->op_type : def->domain + "::" + def->op_type);
      EXPECT_TRUE(std::is_sorted(in->begin(), in->end()) && std::adjacent_find(in->begin(), in->end()) == in->end())
          << op << "'s inputs are not listed once each, in order";
    }
    if (!def->config_inputs.empty()) {
      const auto* schema = ONNX_NAMESPACE::OpSchemaRegistry::Schema(def->op_type, 17, def->domain);
      ASSERT_NE(schema, nullptr) << op;
      for (size_t i : def->config_inputs) EXPECT_LT(i, schema->inputs().size()) << op << " has no input " << i;
    }
    for (size_t i : def->literal_inputs) EXPECT_GT(i, 0u) << op << " takes its data as a literal";
    if (!def->literal_inputs.empty()) {
      EXPECT_EQ(def->declared_role, KernelRole::Indexed) << op << " has literals but no kernel of its own";
    }
    if (def->has(kWindow)) {
      windows.push_back(def->op_type);
      EXPECT_TRUE(def->declared_role == KernelRole::Indexed || def->declared_role == KernelRole::Convolution) << op;
    }
    if (def->has(kTransposedOperands)) {
      transposed.push_back(def->op_type);
      EXPECT_TRUE(def->has(kContraction)) << op;
    }
    if (def->has(kTargetDType)) targets.push_back(def->op_type);
    if (def->autocast_keeps || def->f32_output) {
      kept.push_back(def->domain + "::" + def->op_type);
      EXPECT_TRUE(def->autocast == AutocastClass::Low || def->autocast_keeps) << op << " is low nowhere";
    }
  }
  std::sort(configured.begin(), configured.end());
  EXPECT_EQ(configured, (std::vector<std::string>{"BatchNormalization", "Dropout", "Range", "Resize"}));
  std::sort(literals.begin(), literals.end());
  EXPECT_EQ(literals, (std::vector<std::string>{"CumSum", "Pad", "tcc::Pad"}));
  std::sort(windows.begin(), windows.end());
  EXPECT_EQ(windows, (std::vector<std::string>{"AveragePool", "Conv", "MaxPool"}));
  std::sort(transposed.begin(), transposed.end());
  EXPECT_EQ(transposed, (std::vector<std::string>{"MatMul", "MatMulInteger"}));
  std::sort(targets.begin(), targets.end());
  EXPECT_EQ(targets, (std::vector<std::string>{"Cast", "CastLike"}));
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"::Attention", "::Resize", "tcc::Attention", "tcc::AttentionGrad"}));
}

// On nodes: the inputs a Pad's kernel takes as literals and a Resize's that
// configure it; what autocast leaves of a tcc::AttentionGrad (its statistics
// pass's log-sum-exp input and statistics output, the statistics input of
// the others), of a Resize (its roi and scales) and of a tcc::Attention that
// saves its log-sum-exp (that output).
TEST(OpRegistry, InputFactsOnNodes) {
  Graph g;
  g.set_opset("", 17);
  g.set_opset(std::string(kTccDomain), 1);
  Value* x = g.add_input("x", Type::tensor(DType::F32, {Dim(4)}));
  Node* pad = g.add_node("Pad", {x, x, x}, {"padded"}, "", "pad");
  EXPECT_FALSE(kernel_literal_input(*pad, 0));
  EXPECT_TRUE(kernel_literal_input(*pad, 1) && kernel_literal_input(*pad, 2));
  Node* resize = g.add_node("Resize", {x, x, x}, {"resized"}, "", "resize");
  EXPECT_FALSE(config_input(*resize, 0) || config_input(*pad, 1));
  EXPECT_TRUE(config_input(*resize, 1) && config_input(*resize, 2));
  const OpDef* resize_def = OpRegistry::get().lookup(*resize);
  ASSERT_TRUE(resize_def && resize_def->autocast_keeps);
  EXPECT_FALSE(resize_def->autocast_keeps(*resize, 0));
  EXPECT_TRUE(resize_def->autocast_keeps(*resize, 1) && resize_def->autocast_keeps(*resize, 2));

  const OpDef* grad_def = OpRegistry::get().lookup(std::string(kTccDomain), "AttentionGrad", 1);
  ASSERT_TRUE(grad_def && grad_def->autocast_keeps && grad_def->f32_output);
  std::vector<Value*> ins(7, x);
  Node* stats = g.add_node("AttentionGrad", ins, {"stats"}, std::string(kTccDomain), "stats");
  stats->set_attr("wrt", Attribute::of_string("stats"));
  Node* dq = g.add_node("AttentionGrad", std::vector<Value*>(6, x), {"dq"}, std::string(kTccDomain), "dq");
  dq->set_attr("wrt", Attribute::of_string("q"));
  for (size_t i = 0; i < 7; ++i) {  // the mask (3), and the log-sum-exp (6) or the statistics (5)
    EXPECT_EQ(grad_def->autocast_keeps(*stats, i), i == 3 || i == 6) << i;
    EXPECT_EQ(grad_def->autocast_keeps(*dq, i), i == 3 || i == 5) << i;
  }
  EXPECT_TRUE(grad_def->f32_output(*stats, 0));
  EXPECT_FALSE(grad_def->f32_output(*dq, 0));

  const OpDef* attention_def = OpRegistry::get().lookup(std::string(kTccDomain), "Attention", 1);
  ASSERT_TRUE(attention_def && attention_def->f32_output);
  Node* saving = g.add_node("Attention", {x, x, x}, {"y", "lse"}, std::string(kTccDomain), "saving");
  Node* plain = g.add_node("Attention", {x, x, x}, {"y2"}, std::string(kTccDomain), "plain");
  EXPECT_FALSE(attention_def->f32_output(*saving, 0));
  EXPECT_TRUE(attention_def->f32_output(*saving, 1));
  EXPECT_FALSE(attention_def->f32_output(*plain, 0));
  ASSERT_TRUE(attention_def->autocast_keeps);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(attention_def->autocast_keeps(*plain, i), i == 3) << i;
  const OpDef* onnx_def = OpRegistry::get().lookup("", "Attention", 23);
  ASSERT_TRUE(onnx_def && onnx_def->autocast_keeps);
  Node* onnx = g.add_node("Attention", {x, x, x, x}, {"y3"}, "", "onnx");
  EXPECT_FALSE(onnx_def->autocast_keeps(*onnx, 3));
}

// On nodes: If's and Loop's deciding operand is the condition or trip count
// that is not known, and none when every one is; a Loop whose body computes a
// new condition is decided by that output.
TEST(OpRegistry, RegionChoicesOnNodes) {
  Graph g;
  g.set_opset("", 17);
  Value* cond = g.add_input("cond", Type::tensor(DType::Bool, {}));
  Value* trips = g.add_input("trips", Type::tensor(DType::I64, {}));
  std::set<const Value*> known_values;
  auto known = [&](const Value* v) { return known_values.count(v) > 0; };
  const OpDef* if_def = OpRegistry::get().lookup("", "If", 17);
  const OpDef* loop_def = OpRegistry::get().lookup("", "Loop", 17);
  ASSERT_TRUE(if_def && if_def->region_choice && loop_def && loop_def->region_choice);

  Node* branch = g.add_node("If", {cond}, {"o"}, "", "branch");
  EXPECT_EQ(if_def->region_choice->data_operand(*branch, known), cond);

  auto body = std::make_shared<Graph>();
  body->add_input("i", Type::tensor(DType::I64, {}));
  Value* cond_in = body->add_input("c", Type::tensor(DType::Bool, {}));
  body->add_output(cond_in);
  Node* loop = g.add_node("Loop", {trips, cond}, {}, "", "loop");
  body->set_parent(&g, loop);
  loop->set_attr("body", Attribute::of_graph(body));
  EXPECT_EQ(loop_def->region_choice->data_operand(*loop, known), trips);
  known_values = {trips};
  EXPECT_EQ(loop_def->region_choice->data_operand(*loop, known), cond);
  known_values = {trips, cond};
  EXPECT_EQ(if_def->region_choice->data_operand(*branch, known), nullptr);
  EXPECT_EQ(loop_def->region_choice->data_operand(*loop, known), nullptr);
  Node* flip = body->add_node("Not", {cond_in}, {"flipped"}, "", "flip");
  body->set_outputs({flip->output(0)});
  EXPECT_EQ(loop_def->region_choice->data_operand(*loop, known), flip->output(0));
}

// On nodes: a node the refusal refuses takes no role, and kernel_refusal
// says why; one it accepts takes the declared role. The epilogues apply
// where the op says: Relu after both libraries, Gelu's tanh form after
// cuBLASLt only.
TEST(OpRegistry, RefusalsAndEpiloguesOnNodes) {
  Graph g;
  g.set_opset("", 20);
  auto input = [&](const std::string& name, DType t, std::vector<Dim> dims) {
    return g.add_input(name, Type::tensor(t, std::move(dims)));
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, DType t, std::vector<Dim> dims) {
    std::string name = op + std::to_string(g.nodes().size());
    Node* n = g.add_node(op, std::move(in), {name}, "", name);
    n->output(0)->set_type(Type::tensor(t, std::move(dims)));
    return n;
  };
  for (DType t : {DType::F32, DType::I64}) {
    std::string s(dtype_name(t));
    Node* mm = node("MatMul", {input("a" + s, t, {Dim(2), Dim(3)}), input("b" + s, t, {Dim(3), Dim(4)})}, t,
                    {Dim(2), Dim(4)});
    EXPECT_EQ(kernel_refusal(*mm).empty(), t == DType::F32) << s << ": " << kernel_refusal(*mm);
    EXPECT_EQ(kernel_role(*mm), t == DType::F32 ? KernelRole::Contraction : KernelRole::None) << s;
  }
  Node* reshape = node("Reshape", {input("x", DType::F32, {Dim(6)}), input("shape", DType::I64, {Dim(2)})}, DType::F32,
                       {Dim(2), Dim(3)});
  EXPECT_EQ(kernel_refusal(*reshape),
            "its target shape is computed at run time from values shape inference cannot follow");
  EXPECT_EQ(kernel_role(*reshape), KernelRole::None);

  Value* x = input("y", DType::F32, {Dim(4)});
  Node* relu = node("Relu", {x}, DType::F32, {Dim(4)});
  Node* tanh_gelu = node("Gelu", {x}, DType::F32, {Dim(4)});
  tanh_gelu->set_attr("approximate", Attribute::of_string("tanh"));
  Node* erf_gelu = node("Gelu", {x}, DType::F32, {Dim(4)});
  Node* exp = node("Exp", {x}, DType::F32, {Dim(4)});
  EXPECT_TRUE(library_epilogue(*relu, kGemmEpilogue) && library_epilogue(*relu, kConvEpilogue));
  EXPECT_TRUE(library_epilogue(*tanh_gelu, kGemmEpilogue));
  EXPECT_FALSE(library_epilogue(*tanh_gelu, kConvEpilogue));
  EXPECT_FALSE(library_epilogue(*erf_gelu, kGemmEpilogue));
  EXPECT_FALSE(library_epilogue(*exp, kGemmEpilogue) || library_epilogue(*exp, kConvEpilogue));
  EXPECT_EQ(epilogue_activation(*relu, kConvEpilogue), "relu");
  EXPECT_EQ(epilogue_activation(*tanh_gelu, kGemmEpilogue), "gelu_tanh");
  EXPECT_EQ(epilogue_refusal(*erf_gelu, kGemmEpilogue),
            "an erf Gelu; cuBLASLt's Gelu epilogue is the tanh approximation");
  EXPECT_EQ(epilogue_refusal(*erf_gelu, kConvEpilogue), "");
  EXPECT_EQ(epilogue_refusal(*tanh_gelu, kGemmEpilogue), "");
}

}  // namespace
}  // namespace tcc
