#include "bench/transformer_graph.h"

#include <cmath>
#include <map>
#include <random>

#include "src/diag/errors.h"

namespace tcc::bench {
namespace {

// Names nodes "<scope>/<Op>[_k]" and outputs "<node>_output_<i>", as torch does.
class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  void scope(std::string s) { scope_ = std::move(s); }

  std::vector<Value*> op(const std::string& op_type, const std::vector<Value*>& inputs, size_t n_out = 1) {
    std::string base = scope_ + "/" + op_type;
    int k = counts_[base]++;
    std::string name = k == 0 ? base : base + "_" + std::to_string(k);
    std::vector<std::string> outs;
    for (size_t i = 0; i < n_out; ++i) outs.push_back(name + "_output_" + std::to_string(i));
    last_ = g_.add_node(op_type, inputs, outs, "", name);
    return last_->outputs();
  }
  Value* op1(const std::string& op_type, const std::vector<Value*>& inputs) { return op(op_type, inputs)[0]; }
  Node* last() const { return last_; }

  Value* constant(Tensor t) {
    Value* v = op1("Constant", {});
    last_->set_attr("value", Attribute::of_tensor(std::move(t)));
    return v;
  }
  Value* ints(std::vector<int64_t> v) {
    int64_t n = static_cast<int64_t>(v.size());
    return constant(Tensor::from_i64(v, {n}));
  }
  Value* param(const std::string& name, std::vector<int64_t> shape) {
    Tensor t(DType::F32, shape);
    std::normal_distribution<float> dist(0.0f, 0.1f);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dist(rng_));
    return g_.add_initializer(name, std::move(t));
  }

  // nn.Linear on a 3-D input: MatMul by the transposed weight, then Add(bias, product).
  Value* linear(const std::string& prefix, Value* x, int64_t d_in, int64_t d_out) {
    Value* w = param("onnx::MatMul_" + std::to_string(param_id_++), {d_in, d_out});
    Value* b = param(prefix + ".bias", {d_out});
    return op1("Add", {b, op1("MatMul", {x, w})});
  }

  // x.size()[i] for each i, unsqueezed for a Concat.
  std::vector<Value*> size_dims(Value* x, const std::vector<int64_t>& dims) {
    std::vector<Value*> parts;
    for (int64_t d : dims) {
      Value* s = op1("Shape", {x});
      parts.push_back(op1("Gather", {s, constant(Tensor::scalar_i64(d))}));
      last_->set_attr("axis", Attribute::of_int(0));
    }
    std::vector<Value*> out;
    for (Value* p : parts) out.push_back(op1("Unsqueeze", {p, ints({0})}));
    return out;
  }

 private:
  Graph& g_;
  std::string scope_;
  std::map<std::string, int> counts_;
  Node* last_ = nullptr;
  std::mt19937 rng_{17};
  int64_t param_id_ = 200;
};

Value* layer_norm(Builder& b, const std::string& name, Value* x, int64_t d) {
  Value* w = b.param(name + ".weight", {d});
  Value* bias = b.param(name + ".bias", {d});
  Value* y = b.op1("LayerNormalization", {x, w, bias});
  b.last()->set_attr("axis", Attribute::of_int(-1));
  b.last()->set_attr("epsilon", Attribute::of_float(1e-5f));
  return y;
}

Value* split_heads(Builder& b, Value* x, const StackShape& s, std::vector<int64_t> perm) {
  auto bs = b.size_dims(x, {0, 1});
  Value* shape = b.op1("Concat", {bs[0], bs[1], b.ints({s.heads}), b.ints({s.hidden / s.heads})});
  b.last()->set_attr("axis", Attribute::of_int(0));
  Value* r = b.op1("Reshape", {x, shape});
  b.last()->set_attr("allowzero", Attribute::of_int(0));
  Value* t = b.op1("Transpose", {r});
  b.last()->set_attr("perm", Attribute::of_ints(std::move(perm)));
  return t;
}

Value* block(Builder& b, Value* x, int layer, Value* mask_buffer, const StackShape& s) {
  const int64_t d = s.hidden;
  const std::string h = "h." + std::to_string(layer);
  const std::string hs = "/" + h;

  b.scope(hs + "/ln_1");
  Value* y = layer_norm(b, h + ".ln_1", x, d);
  b.scope(hs + "/attn/c_attn");
  Value* qkv = b.linear(h + ".attn.c_attn", y, d, 3 * d);
  b.scope(hs + "/attn");
  auto parts = b.op("Split", {qkv, b.ints({d, d, d})}, 3);
  b.last()->set_attr("axis", Attribute::of_int(2));
  Value* q = split_heads(b, parts[0], s, {0, 2, 1, 3});
  Value* k = split_heads(b, parts[1], s, {0, 2, 3, 1});
  Value* v = split_heads(b, parts[2], s, {0, 2, 1, 3});
  Value* w = b.op1("MatMul", {q, k});
  w = b.op1("Div", {w, b.constant(Tensor::scalar_f32(std::sqrt(static_cast<float>(d / s.heads))))});
  Value* seq = b.op1("Gather", {b.op1("Shape", {y}), b.constant(Tensor::scalar_i64(1))});
  b.last()->set_attr("axis", Attribute::of_int(0));
  Value* mask = mask_buffer;
  for (int64_t axis : {2, 3}) {
    Value* end = b.op1("Unsqueeze", {seq, b.ints({0})});
    mask = b.op1("Slice", {mask, b.ints({0}), end, b.ints({axis}), b.ints({1})});
  }
  w = b.op1("Where", {mask, w, b.constant(Tensor::scalar_f32(-3.4028234663852886e38f))});
  w = b.op1("Softmax", {w});
  b.last()->set_attr("axis", Attribute::of_int(-1));
  Value* a = b.op1("Transpose", {b.op1("MatMul", {w, v})});
  b.last()->set_attr("perm", Attribute::of_ints({0, 2, 1, 3}));
  auto bs = b.size_dims(a, {0, 1});
  Value* merged = b.op1("Concat", {bs[0], bs[1], b.ints({d})});
  b.last()->set_attr("axis", Attribute::of_int(0));
  a = b.op1("Reshape", {a, merged});
  b.last()->set_attr("allowzero", Attribute::of_int(0));
  b.scope(hs + "/attn/c_proj");
  a = b.linear(h + ".attn.c_proj", a, d, d);
  b.scope(hs);
  x = b.op1("Add", {x, a});

  b.scope(hs + "/ln_2");
  y = layer_norm(b, h + ".ln_2", x, d);
  b.scope(hs + "/mlp/c_fc");
  y = b.linear(h + ".mlp.c_fc", y, d, 4 * d);
  b.scope(hs + "/mlp/act");
  Value* e = b.op1("Erf", {b.op1("Div", {y, b.constant(Tensor::scalar_f32(std::sqrt(2.0f)))})});
  e = b.op1("Add", {e, b.constant(Tensor::scalar_f32(1.0f))});
  y = b.op1("Mul", {b.op1("Mul", {y, e}), b.constant(Tensor::scalar_f32(0.5f))});
  b.scope(hs + "/mlp/c_proj");
  y = b.linear(h + ".mlp.c_proj", y, 4 * d, d);
  b.scope(hs);
  return b.op1("Add", {x, y});
}

}  // namespace

std::unique_ptr<Model> build_transformer_stack(const StackShape& s) {
  auto m = std::make_unique<Model>();
  m->producer = "tcc_bench";
  m->ir_version = 8;
  Graph& g = *m->graph;
  g.set_name("main_graph");
  g.set_opset("", 17);
  Value* x = g.add_input("input", Type::tensor(DType::F32, {Dim::symbol("batch"), Dim::symbol("seq"), s.hidden}));
  Tensor mask(DType::Bool, {1, 1, s.context, s.context});
  for (int64_t i = 0; i < s.context; ++i)
    for (int64_t j = 0; j <= i; ++j) mask.set_i64(i * s.context + j, 1);
  // One causal-mask buffer shared by every layer keeps the file small.
  Value* mask_buffer = g.add_initializer("attn.bias", mask);
  Builder b(g);
  for (int layer = 0; static_cast<int64_t>(g.nodes().size()) < s.min_nodes; ++layer)
    x = block(b, x, layer, mask_buffer, s);
  b.scope("");
  Value* out = b.op1("Identity", {x});
  g.add_output(out);
  return m;
}

}  // namespace tcc::bench
