#include "src/ir/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "src/ir/verifier.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

// parse -> print must give back the text exactly.
void expect_round_trip(const std::string& text) {
  std::unique_ptr<Model> m = parse_model(text, "t.tir");
  EXPECT_TRUE(verify(*m->graph).empty());
  EXPECT_EQ(print_model(*m), text);
}

// The message of the InputError that parsing `text` throws.
std::string parse_error(const std::string& text) {
  return input_error([&] { parse_model(text, "t.tir"); });
}

TEST(TextIr, RoundTripsHeaderTypesAndMetadata) {
  expect_round_trip(R"(graph main opset(ai.onnx: 17, com.microsoft: 1) ir_version(8) producer("pytorch 2.11") {
  input %x: f32[batch, seq, 768]
  input %ids: i64[batch, seq*4+1]
  input %any
  input %unranked: f32[*]
  input %partly: f32[?, 3, (seq+1)//(2)]
  input %maybe: opt<seq<f32[*]>>
  input %unknown_elems: seq<?>
  input %"odd name\n\x01": f32[]
  input %onnx::MatMul_12: f32[768, 768]
  input %"ends with:": f32[1]
  input %"a//b": f32[1]
  const %w: f32[2, 2] = [1.0, 2.0, 3.5, -4.0]
  %0: f32[batch, seq, 768] = MatMul(%x, %onnx::MatMul_12) name("layer0/MatMul") loc("model.py:12")
  %1: f32[batch, seq, 768], %2: i64[batch, seq, 1] = TopK(%0, %ids) {axis = -1, largest = 1}
  %3 = com.microsoft::FusedGelu(%1)
  %4: f32[2] = Clip(%3, none, %w) part("backward")
  %5 = Pad(%4, none, none) name("update") part("optimizer")
  Print(%5) name("side")
  %6 = "weird op"(%"odd name\n\x01", %"ends with:", %"a//b")
  output %3
  output %4
  output %2
}
)");
}

TEST(TextIr, RoundTripsEveryAttributeKind) {
  expect_round_trip(R"(graph g {
  input %x: f32[4]
  %y: f32[4] = Custom(%x) {a = 1, b = [1, -2, 9223372036854775807], c = 0.5, d = "s\t\"q\"\\", e = tensor<f32[1]> [0.0], f = floats[], g = ints[], h = strings[], i = ["a", ""], j = [1.0, -0.0, nan, -inf, 1e+10, 3.1415927, 1.4013e-45], k = -nan, l = inf, m = 2.0, n = tensor<i64[]> [7], o = tensor<str[2]> ["p", "q"], p = type<opt<seq<f32[2, n]>>>}
  output %y
}
)");
}

TEST(TextIr, RoundTripsTensorLiterals) {
  std::string big = "hex\"";
  for (int i = 0; i < 65; ++i) big += "0" + std::to_string(i % 10) + "000000";
  expect_round_trip(R"(graph g {
  const %mask: bool[3] = [true, false, true]
  const %names: str[2] = ["a", "b\x01"]
  const %h: f16[2] = hex"003c00c0"
  const %b: bf16[1] = hex"803f"
  const %u: u64[2] = [18446744073709551615, 0]
  const %i8: i8[2] = [-128, 127]
  const %u8: u8[2] = [0, 255]
  const %d: f64[3] = [0.1, 1e+300, -inf]
  const %f: f32[4] = [nan, -inf, 0.1, 16777216.0]
  const %empty: f32[0, 3] = []
  const %scalar: i64[] = [3]
  const %big: i32[65] = )" + big + R"("
  output %big
}
)");
}

TEST(TextIr, RoundTripsNestedRegions) {
  expect_round_trip(R"(graph main opset(ai.onnx: 17) {
  input %c: bool[]
  input %y: f32[]
  const %n: i64[] = [4]
  %5: f32[] = If(%c) {else_branch = graph else_branch {
      %a: f32[] = Identity(%y)
      output %a
    }, then_branch = graph then_branch {
      %l: f32[] = Loop(%n, none, %y) {body = graph body {
          input %i: i64[]
          input %cond: bool[]
          input %acc: f32[]
          const %one: f32[] = [1.0]
          %next: f32[] = Add(%acc, %one)
          output %cond
          output %next
        }}
      output %l
    }}
  output %5
}
)");
}

TEST(TextIr, ParsedValuesMatchTheText) {
  auto m = parse_model(R"(graph main opset(ai.onnx: 17, com.microsoft: 1) ir_version(8) producer("pytorch 2.11") {
  input %x: f32[batch, seq*4]
  const %w: f32[2] = [1.5, -2.0]
  %0: f32[batch, seq*4], %1 = com.microsoft::Foo(%x, none, %w) {alpha = 0.5, axes = [0, 1]} name("n") loc("a.py:3")
  output %0
}
)");
  const Graph& g = *m->graph;
  EXPECT_EQ(g.name(), "main");
  EXPECT_EQ(g.opsets().at(""), 17);
  EXPECT_EQ(g.opsets().at("com.microsoft"), 1);
  EXPECT_EQ(m->ir_version, 8);
  EXPECT_EQ(m->producer, "pytorch 2.11");
  EXPECT_EQ(g.file(), "<text>");
  const Value* x = g.inputs().at(0);
  ASSERT_EQ(x->type().rank(), 2u);
  EXPECT_TRUE(x->type().shape()[0].is_symbolic());
  EXPECT_EQ(x->type().shape()[1].expr(), SymExpr::symbol("seq") * SymExpr::constant(4));
  ASSERT_EQ(g.initializers().size(), 1u);
  EXPECT_TRUE(g.initializers()[0]->initializer().identical(Tensor::from_f32({1.5f, -2.0f})));
  const Node& n = *g.nodes().at(0);
  EXPECT_EQ(n.domain(), "com.microsoft");
  EXPECT_EQ(n.op_type(), "Foo");
  EXPECT_EQ(n.name(), "n");
  EXPECT_EQ(n.source(), "a.py:3");
  EXPECT_EQ(n.num_inputs(), 3u);
  EXPECT_FALSE(n.has_input(1));
  EXPECT_EQ(n.input(2), g.initializers()[0]);
  EXPECT_FLOAT_EQ(n.get_float("alpha", 0), 0.5f);
  EXPECT_EQ(n.get_ints("axes"), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(n.output(1)->type().is_unknown());
  EXPECT_EQ(g.outputs().at(0), n.output(0));
}

TEST(TextIr, RegionsReadEnclosingValuesAndLinkToTheirNode) {
  auto m = parse_model(R"(graph main {
  input %c: bool[]
  input %y: f32[]
  %r: f32[] = If(%c) {then_branch = graph t {
      output %y
    }}
  output %r
}
)");
  const Node& n = *m->graph->nodes().at(0);
  Graph* t = n.get_graph("then_branch");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->parent(), m->graph.get());
  EXPECT_EQ(t->parent_node(), &n);
  EXPECT_EQ(t->outputs().at(0), m->graph->inputs().at(1));
}

TEST(TextIr, CommentsAndLayoutAreIgnored) {
  auto m = parse_model("// leading comment\ngraph main{input %x: f32[2]// trailing\n%y: f32[2]=Relu(%x)output %y}");
  EXPECT_EQ(print_model(*m), "graph main {\n  input %x: f32[2]\n  %y: f32[2] = Relu(%x)\n  output %y\n}\n");
}

TEST(TextIr, InputWithDefaultValue) {
  expect_round_trip("graph g {\n  input %x: f32[2] = [1.0, 2.0]\n  output %x\n}\n");
}

// Graphs built with the Graph API: print, parse, print again.
TEST(TextIr, GraphApiGraphsRoundTrip) {
  Model m;
  Graph& g = *m.graph;
  g.set_name("built");
  g.set_opset("", 18);
  m.ir_version = 9;
  Value* x = g.add_input("x", Type::tensor(DType::F32, {Dim::symbol("n"), 3}));
  Value* w = g.add_initializer("w", Tensor::from_f32({0.1f, 0.2f, 0.3f}));
  Tensor half(DType::F16, {3});
  half.set_f64(0, 1.5);
  half.set_f64(1, -0.0);
  half.set_f64(2, 65504);
  Value* h = g.add_initializer("h", half);
  // A NaN with a payload has no list spelling; the printer must fall back to hex.
  uint32_t payload_nan_bits = 0x7fa00001;
  float payload_nan;
  std::memcpy(&payload_nan, &payload_nan_bits, 4);
  Value* p = g.add_initializer("p", Tensor::from_f32({payload_nan, 1.0f}));
  Node* mul = g.add_node("Mul", {x, w}, {"m"}, "", "mul0");
  mul->output(0)->set_type(Type::tensor(DType::F32, {Dim::symbol("n"), 3}));
  mul->set_attr("f", Attribute::of_float(0.1f));
  mul->set_attr("fs", Attribute::of_floats({1e-7f, 3.0f}));
  mul->set_attr("i", Attribute::of_int(-3));
  mul->set_attr("s", Attribute::of_string("quote\" backslash\\"));
  mul->set_attr("ss", Attribute::of_strings({"a", "b"}));
  mul->set_attr("t", Attribute::of_tensor(half));
  auto body = std::make_shared<Graph>();
  body->set_name("body");
  body->set_parent(&g, nullptr);
  Value* bi = body->add_input("bi", Type::tensor(DType::F32, {}));
  Node* inner = body->add_node("Neg", {bi}, {"bo"});
  body->add_output(inner->output(0));
  Node* loop = g.add_node("Scan", {mul->output(0), h, p}, {"s"});
  body->set_parent(&g, loop);
  loop->set_attr("body", Attribute::of_graph(body));
  g.add_output(loop->output(0));

  std::string text = print_model(m);
  EXPECT_NE(text.find("const %p: f32[2] = hex\"0100a07f0000803f\""), std::string::npos) << text;
  auto back = parse_model(text);
  EXPECT_EQ(print_model(*back), text);
  EXPECT_EQ(back->ir_version, 9);
  const Graph& bg = *back->graph;
  ASSERT_EQ(bg.initializers().size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(bg.initializers()[i]->initializer().identical(g.initializers()[i]->initializer())) << i;
  const Node& bmul = *bg.nodes().at(0);
  for (const auto& [name, a] : mul->attrs()) {
    const Attribute* b = bmul.attr(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->kind, a.kind) << name;
  }
  EXPECT_EQ(bmul.attr("f")->f, 0.1f);
  EXPECT_EQ(bmul.attr("fs")->floats, (std::vector<float>{1e-7f, 3.0f}));
  EXPECT_EQ(bmul.attr("s")->s, "quote\" backslash\\");
  EXPECT_TRUE(bmul.attr("t")->t.identical(half));
}

TEST(TextIr, Errors) {
  // Each case: text, expected "line:col: message".
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"graph g {\n  input %x: f33[2]\n}", "t.tir:2:13: expected a dtype (f32 f16 bf16 f64 f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f4e2m1 i64 i32 i16 i8 "
                                           "i4 u8 u16 u32 u64 u4 bool str), got 'f33'"},
      {"graph g {\n  %y = Relu(%nope)\n}",
       "t.tir:2:13: undefined value '%nope' (values must be defined before they are used)"},
      {"graph g {\n  const %c: i4[2] = hex\"0708\"\n}",
       "t.tir:2:24: expected each byte to hold one i4 element, got 08 at element 1"},
      {"graph g {\n  %y = Relu(%z)\n  %z = Relu(%y)\n}",
       "t.tir:2:13: undefined value '%z' (values must be defined before they are used)"},
      {"graph g {\n  input %x: f32[1]\n  input %x: f32[1]\n}", "t.tir:3:9: value '%x' is already defined"},
      {"graph g {\n  input %x: f32[1]\n  %a, %a = Split(%x)\n}", "t.tir:3:7: value '%a' is already defined"},
      {"graph g {\n  input %x: f32[-1]\n}",
       "t.tir:2:17: expected a dimension (integer, symbolic expression or ?), got '-1' (negative)"},
      {"graph g {\n  input %x: f32[99999999999*99999999999]\n}",
       "t.tir:2:17: expected a dimension (integer, symbolic expression or ?), got '99999999999*99999999999' (too "
       "large)"},
      {"graph g {\n  input %x: f32[a+]\n}",
       "t.tir:2:17: expected a dimension (integer, symbolic expression or ?), got 'a+'"},
      {"graph g producer(\"abc\n) {}", "t.tir:1:18: unterminated string"},
      {"graph g {\n  input %x: f32[1]\n", "t.tir:3:1: expected a statement or '}', got end of file"},
      {"graph g {\n  input %x: f32[1]\n  %y = Relu(%x\n}", "t.tir:4:1: expected ')', got '}'"},
      {"graph g {\n  const %w: f32[2] = [1.0]\n}", "t.tir:2:22: expected 2 elements for f32[2], got 1"},
      {"graph g {\n  const %w: u8[1] = [256]\n}", "t.tir:2:22: expected a value of type u8, got '256'"},
      {"graph g {\n  const %w: i64[1] = [1.5]\n}", "t.tir:2:23: expected a value of type i64, got '1.5'"},
      {"graph g {\n  const %w: bool[1] = [1]\n}", "t.tir:2:24: expected true or false, got '1'"},
      {"graph g {\n  const %w: f32[1] = hex\"00\"\n}",
       "t.tir:2:25: expected 1 elements of f32 in hex, got 2 hex digits"},
      {"graph g {\n  const %w: f32[?] = [1.0]\n}",
       "t.tir:2:13: expected a tensor type with static dims for a constant, got 'f32[?]'"},
      {"graph g {\n  %y = Foo() {a = []}\n}",
       "t.tir:2:20: expected a list element (write ints[], floats[] or strings[] for an empty list), got ']'"},
      {"graph g {\n  %y = Foo() {a = 1, a = 2}\n}", "t.tir:2:22: attribute 'a' given twice"},
      {"graph g {\n  %y = Foo() {a = 99999999999999999999}\n}",
       "t.tir:2:19: expected a 64-bit integer, got '99999999999999999999'"},
      {"graph g {\n  %y = Foo() {a = \"\\q\"}\n}", "t.tir:2:20: unknown escape '\\q'"},
      {"graph g opset(ai.onnx: 1, ai.onnx: 2) {}", "t.tir:1:27: opset for domain '' given twice"},
      {"graph g {}\ngraph h {}", "t.tir:2:1: expected end of file, got 'graph'"},
      {"model g {}", "t.tir:1:1: expected 'graph', got 'model'"},
      {"graph g {\n  input x: f32[1]\n}", "t.tir:2:9: expected a value name ('%name'), got 'x:'"},
      {"graph g {\n  output %\n}", "t.tir:3:1: expected a value name after '%', got '}'"},
      {"", "t.tir:1:1: expected 'graph', got end of file"},
      {"graph g {\x01}", "t.tir:1:10: expected an op name, got byte 0x01"},
      {"graph g {\n  %y = Relu() part(\"sideways\")\n}",
       "t.tir:2:15: expected part \"forward\", \"backward\" or \"optimizer\", got \"sideways\""},
  };
  for (const auto& [text, msg] : cases) EXPECT_EQ(parse_error(text), msg) << text;
}

TEST(TextIr, NestingAndDimComplexityAreCapped) {
  std::string regions = "graph g {\n  input %c: bool[]\n";
  for (int i = 0; i < 70; ++i) regions += "%r" + std::to_string(i) + " = If(%c) {b = graph b {\n";
  EXPECT_NE(parse_error(regions).find("regions nested deeper than 64"), std::string::npos);
  std::string types = "graph g {\n  input %x: ";
  for (int i = 0; i < 100000; ++i) types += "seq<";
  EXPECT_EQ(parse_error(types), "t.tir:2:269: types nested deeper than 64");
  std::string parens = "graph g {\n  input %x: f32[";
  for (int i = 0; i < 100000; ++i) parens += "(";
  EXPECT_NE(parse_error(parens + "]\n}").find("(too long)"), std::string::npos);
  // 24 symbols in products of sums: 3^8 terms, still quick; 27 symbols are refused.
  std::string product, names = "abcdefghijklmnopqrstuvwxyzABCDEFG";
  for (int f = 0; f < 8; ++f)
    product += std::string(f ? "*" : "") + "(" + names[3 * f] + "+" + names[3 * f + 1] + "+" + names[3 * f + 2] + ")";
  auto big = parse_model("graph g {\n  input %x: f32[" + product + "]\n}");
  EXPECT_EQ(big->graph->inputs()[0]->type().shape()[0].expr().symbols().size(), 24u);
  EXPECT_NE(parse_error("graph g {\n  input %x: f32[" + product + "*(y+z+A)]\n}").find("(too complex)"),
            std::string::npos);
  std::string minus = "graph g {\n  input %x: f32[";
  for (int i = 0; i < 100000; ++i) minus += "-";
  EXPECT_NE(parse_error(minus + "1]\n}").find("(too long)"), std::string::npos);
}

// What the fuzzer checks, on a few thousand inputs: every prefix of a valid
// text, and the text with each byte replaced, either parses or is an InputError.
TEST(TextIr, MalformedInputsAreCleanErrors) {
  const std::string text = R"(graph main opset(ai.onnx: 17) producer("p") {
  input %c: bool[]
  input %x: f32[n, 2*n]
  const %w: f16[2] = hex"003c00c0"
  const %s: str[1] = ["a\x00"]
  %y: f32[n, 2*n] = If(%c) {b = graph b {
      %z = Neg(%x) {a = [1.0, nan], t = tensor<i64[2]> [1, -1]}
      output %z
    }} name("n") loc("l")
  output %y
}
)";
  auto try_parse = [](const std::string& t) {
    try {
      auto m = parse_model(t);
      EXPECT_TRUE(verify(*m->graph).empty()) << t;
      EXPECT_EQ(print_model(*parse_model(print_model(*m))), print_model(*m)) << t;
    } catch (const InputError&) {
    }
  };
  for (size_t i = 0; i <= text.size(); ++i) try_parse(text.substr(0, i));
  for (size_t i = 0; i < text.size(); ++i)
    for (char c : std::string("%\"{}[](),:=<>/\\-0x\n")) {
      std::string t = text;
      t[i] = c;
      try_parse(t);
    }
}

}  // namespace
}  // namespace tcc
