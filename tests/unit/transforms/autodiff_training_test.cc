// tcc's autodiff on whole models: symbolic batches, the built-in losses,
// whole-model gradients of the MLP, ResNet and GPT-2 block fixtures (float32)
// against finite differences, optimizer steps, configuration errors, and
// `tcc explain --train` on the ten-layer Linear example.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/transforms/grad_check.h"

namespace tcc {
namespace {

// Symbolic batch: gradients of broadcast operands reduce over `batch`
// without knowing it, and the graph runs at any batch size.
TEST(Autodiff, SymbolicBatchBroadcast) {
  std::string text = fill_random(R"(graph main opset(ai.onnx: 17) {
  input %x: f64[batch, 3]
  const %w: f64[3, 4] = $R
  const %wb: f64[4] = $R
  %m: f64[batch, 4] = MatMul(%x, %w)
  %y: f64[batch, 4] = Add(%m, %wb)
  %t: f64[batch, 4] = Tanh(%y)
  %loss: f64[] = ReduceMean(%t) {keepdims = 0}
  output %loss
}
)", 3);
  for (int64_t batch : {1, 5}) {
    Tensor x(DType::F64, {batch, 3});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::sin(static_cast<double>(i)));
    check_gradients(text, {{"x", x}});
  }
}

// Nearest Resize on a symbolic batch: the batch is kept, so the rule need not
// know it. H doubles (summed over blocks, the batch copied by Reshape's 0), W
// by 1.5 or 5/3 (a matrix); with a symbolic dim after a doubled axis, a matrix too.
TEST(Autodiff, NearestResizeSymbolicBatch) {
  struct Case {
    const char* text;
    std::vector<int64_t> x_shape;  // -1 for the batch
  };
  const Case cases[] = {{R"(graph main opset(ai.onnx: 13) {
  input %x: f64[batch, 1, 2, 3]
  const %w: f64[1, 2, 3] = $R
  const %sc: f32[4] = [1.0, 1.0, 2.0, 1.5]
  %m: f64[batch, 1, 2, 3] = Mul(%x, %w)
  %y: f64[batch, 1, 4, 4] = Resize(%m, none, %sc) {mode = "nearest"}
  %t: f64[batch, 1, 4, 4] = Sin(%y)
  %loss: f64[] = ReduceSum(%t) {keepdims = 0}
  output %loss
}
)", {-1, 1, 2, 3}},
                        // Sizes computed from x's shape (not a constant): they are y's dims.
                        {R"(graph main opset(ai.onnx: 13) {
  input %x: f64[batch, 1, 2, 3]
  const %w: f64[1, 2, 3] = $R
  const %hw: i64[2] = [4, 5]
  const %st: i64[1] = [0]
  const %en: i64[1] = [2]
  %m: f64[batch, 1, 2, 3] = Mul(%x, %w)
  %s: i64[4] = Shape(%m)
  %nc: i64[2] = Slice(%s, %st, %en)
  %sz: i64[4] = Concat(%nc, %hw) {axis = 0}
  %y: f64[batch, 1, 4, 5] = Resize(%m, none, none, %sz) {mode = "nearest"}
  %t: f64[batch, 1, 4, 5] = Sin(%y)
  %loss: f64[] = ReduceSum(%t) {keepdims = 0}
  output %loss
}
)", {-1, 1, 2, 3}},
                        {R"(graph main opset(ai.onnx: 13) {
  input %x: f64[2, batch]
  const %w: f64[2, 1] = $R
  const %sc: f32[2] = [2.0, 1.0]
  %m: f64[2, batch] = Mul(%x, %w)
  %y: f64[4, batch] = Resize(%m, none, %sc) {mode = "nearest"}
  %t: f64[4, batch] = Sin(%y)
  %loss: f64[] = ReduceSum(%t) {keepdims = 0}
  output %loss
}
)", {2, -1}}};
  for (const Case& c : cases) {
    std::string text = fill_random(c.text, 9);
    for (int64_t batch : {1, 3}) {
      std::vector<int64_t> shape = c.x_shape;
      std::replace(shape.begin(), shape.end(), int64_t{-1}, batch);
      Tensor x(DType::F64, shape);
      for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(static_cast<double>(i)));
      check_gradients(text, {{"x", x}});
    }
  }
}

// Slices along a symbolic axis: x[:, seq // 2 :] (the start computed from the
// shape), a causal LM's x[:, :-1] * x[:, 1:] and an empty x[:, 4:2]. The
// gradient is the incoming one between zeros cut by the slice's own bounds, at
// even and odd sizes.
TEST(Autodiff, SliceAlongSymbolicAxis) {
  std::string text = fill_random(R"(graph main opset(ai.onnx: 17) {
  input %x: f64[2, seq]
  const %w: f64[2, 1] = $R
  const %one: i64[] = [1]
  const %two: i64[] = [2]
  const %zero1: i64[1] = [0]
  const %one1: i64[1] = [1]
  const %minus1: i64[1] = [-1]
  const %end: i64[1] = [9223372036854775807]
  const %two1: i64[1] = [2]
  const %four1: i64[1] = [4]
  %m: f64[2, seq] = Mul(%x, %w)
  %shape: i64[2] = Shape(%m)
  %seq: i64[] = Gather(%shape, %one) {axis = 0}
  %half: i64[] = Div(%seq, %two)
  %half1: i64[1] = Unsqueeze(%half, %zero1)
  %tail = Slice(%m, %half1, %end, %one1)
  %head = Slice(%m, %zero1, %minus1, %one1)
  %shifted = Slice(%m, %one1, %end, %one1)
  %p = Mul(%head, %shifted)
  %t = Sin(%tail)
  %lp: f64[] = ReduceSum(%p) {keepdims = 0}
  %lt: f64[] = ReduceSum(%t) {keepdims = 0}
  %empty = Slice(%m, %four1, %two1, %one1)
  %le: f64[] = ReduceSum(%empty) {keepdims = 0}
  %lpt: f64[] = Add(%lp, %lt)
  %loss: f64[] = Add(%lpt, %le)
  output %loss
}
)", 5);
  for (int64_t seq : {3, 6}) {
    Tensor x(DType::F64, {2, seq});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(static_cast<double>(i)));
    check_gradients(text, {{"x", x}});
  }
}

// Tiles whose view of g is not constant: a weight repeated batch times (the
// repeats computed from the shapes, as DeBERTa's relative embeddings
// .repeat(batch, 1, 1) export) and an input of symbolic size repeated twice.
TEST(Autodiff, TileOfSymbolicRepeatsAndDims) {
  std::string text = fill_random(R"(graph main opset(ai.onnx: 17) {
  input %x: f64[batch, 3]
  const %w: f64[2, 3] = $R
  const %v: f64[1, 3] = $R
  const %zero: i64[] = [0]
  const %zero1: i64[1] = [0]
  const %one1: i64[1] = [1]
  const %twice: i64[2] = [2, 1]
  %shape: i64[2] = Shape(%x)
  %batch: i64[] = Gather(%shape, %zero) {axis = 0}
  %batch1: i64[1] = Unsqueeze(%batch, %zero1)
  %reps: i64[2] = Concat(%batch1, %one1) {axis = 0}
  %tw = Tile(%w, %reps)
  %xv: f64[batch, 3] = Mul(%x, %v)
  %tx = Tile(%xv, %twice)
  %p = Mul(%tw, %tx)
  %t = Sin(%p)
  %loss: f64[] = ReduceSum(%t) {keepdims = 0}
  output %loss
}
)", 11);
  for (int64_t batch : {1, 3}) {
    Tensor x(DType::F64, {batch, 3});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(static_cast<double>(i)));
    check_gradients(text, {{"x", x}});
  }
}

// Convolutions, a ConvTranspose and an AveragePool over an image of symbolic
// size h x 2h: a depthwise and a plain strided convolution (their input
// gradients a ConvTranspose whose output padding is 1 along 2h, a constant,
// and open along h, where it is cut to x's size), a grouped dilated one, a
// 1x1 one (its weight gradient a product over the symbolic N*O, not a
// convolution of g's size), a strided AveragePool, a MaxPool and a
// GlobalAveragePool, at two sizes.
TEST(Autodiff, WindowsOverSymbolicImage) {
  std::string text = fill_random(R"(graph main opset(ai.onnx: 17) {
  input %x: f64[2, 4, h, 2*h]
  const %w0: f64[1, 4, 1, 1] = $R
  const %w1: f64[4, 1, 3, 3] = $R
  const %w2: f64[6, 2, 3, 3] = $R
  const %w3: f64[4, 6, 1, 1] = $R
  const %w4: f64[4, 4, 3, 3] = $R
  const %w5: f64[4, 2, 3, 3] = $R
  %m = Mul(%x, %w0)
  %c1 = Conv(%m, %w1) {group = 4, strides = [2, 2], pads = [1, 1, 1, 1]}
  %c2 = Conv(%c1, %w2) {group = 2, dilations = [2, 1], pads = [2, 1, 2, 1]}
  %c3 = Conv(%c2, %w3)
  %c4 = Conv(%c3, %w4) {strides = [2, 2], pads = [1, 0, 1, 0]}
  %p = AveragePool(%c4) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}
  %u = ConvTranspose(%p, %w5) {strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1]}
  %t = Sin(%u)
  %mp = MaxPool(%c3) {kernel_shape = [2, 2], strides = [2, 2]}
  %ga = GlobalAveragePool(%mp)
  %s = Sin(%ga)
  %lt: f64[] = ReduceSum(%t) {keepdims = 0}
  %ls: f64[] = ReduceSum(%s) {keepdims = 0}
  %loss: f64[] = Add(%lt, %ls)
  output %loss
}
)", 7);
  for (int64_t h : {5, 8}) {
    Tensor x(DType::F64, {2, 4, h, 2 * h});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(static_cast<double>(i)));
    check_gradients(text, {{"x", x}});
  }
}

TEST(Autodiff, BuiltinLossesOnSymbolicBatch) {
  std::string text = fill_random(R"(graph main opset(ai.onnx: 17) {
  input %x: f64[batch, 3]
  const %w: f64[3, 4] = $R
  %y: f64[batch, 4] = MatMul(%x, %w)
  output %y
}
)", 5);
  Tensor x(DType::F64, {3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(static_cast<double>(i)));
  Tensor target(DType::F64, {3, 4});
  for (int64_t i = 0; i < target.numel(); ++i) target.set_f64(i, 0.1 * static_cast<double>(i));
  Tensor classes = Tensor::from_i64({3, 0, 2}, {3});

  // The loss is the builtin one; FD perturbs the forward graph with the same loss appended.
  for (LossKind kind : {LossKind::Mse, LossKind::CrossEntropy}) {
    TrainOptions opts;
    opts.builtin_loss = BuiltinLoss{kind, "y", "target"};
    std::unique_ptr<Model> fwd = parse_model(text);
    opts.param_patterns = {"nothing-matches-so-only-the-loss-is-built*"};
    EXPECT_THROW(build_training_graph(*fwd, opts), InputError);
    opts.param_patterns.clear();
    std::map<std::string, Tensor> inputs{{"x", x}, {"target", kind == LossKind::Mse ? target : classes}};
    std::unique_ptr<Model> train = parse_model(text);
    TrainingGraph tg = build_training_graph(*train, opts);
    ASSERT_EQ(tg.params, std::vector<std::string>{"w"});
    Interpreter interp;
    std::vector<Tensor> outs = interp.run(*train->graph, inputs);
    // Reference loss computed here from the forward output.
    auto loss_with = [&](const Tensor& w) {
      std::unique_ptr<Model> m = parse_model(text);
      m->graph->find_local("w")->set_initializer(w);
      Tensor y = Interpreter().run(*m->graph, {{"x", x}})[0];
      double total = 0;
      for (int64_t b = 0; b < 3; ++b) {
        if (kind == LossKind::Mse) {
          for (int64_t j = 0; j < 4; ++j) total += std::pow(y.get_f64(b * 4 + j) - target.get_f64(b * 4 + j), 2);
        } else {
          double mx = -1e300, s = 0;
          for (int64_t j = 0; j < 4; ++j) mx = std::max(mx, y.get_f64(b * 4 + j));
          for (int64_t j = 0; j < 4; ++j) s += std::exp(y.get_f64(b * 4 + j) - mx);
          total -= y.get_f64(b * 4 + classes.get_i64(b)) - mx - std::log(s);
        }
      }
      return total / (kind == LossKind::Mse ? 12.0 : 3.0);
    };
    Tensor w = parse_model(text)->graph->find_local("w")->initializer();
    EXPECT_NEAR(outs[0].get_f64(0), loss_with(w), 1e-12);
    for (int64_t i = 0; i < w.numel(); ++i) {
      Tensor plus = w.clone(), minus = w.clone();
      plus.set_f64(i, w.get_f64(i) + 1e-6);
      minus.set_f64(i, w.get_f64(i) - 1e-6);
      double numeric = (loss_with(plus) - loss_with(minus)) / 2e-6;
      EXPECT_NEAR(outs[1].get_f64(i), numeric, 1e-6 * (1 + std::abs(numeric))) << i;
    }
  }
}

// Whole models in float32: the interpreter rounds every op to f32, so central
// differences use h = 1e-3 and a relative tolerance of 2% (plus 2e-3 of the
// largest gradient of that parameter, for elements whose gradient is near 0).
// A larger step moves ResNet's ReLUs and MaxPools across their kinks (at 1e-2
// one first-conv weight's difference was 6% off).
void check_fixture(const std::string& name, const std::vector<int64_t>& input_shape, uint32_t seed) {
  std::string path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + name + ".onnx";
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::unique_ptr<Model> fwd = load_model(path);
  Tensor x(DType::F32, input_shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, dist(rng));
  Tensor y = Interpreter().run(*fwd->graph, {{"input", x}})[0];
  Tensor target(DType::F32, y.shape());
  for (int64_t i = 0; i < target.numel(); ++i) target.set_f64(i, dist(rng));
  std::string out_name = fwd->graph->outputs()[0]->name();
  std::map<std::string, Tensor> inputs{{"input", x}, {"target", target}};

  TrainOptions opts;
  opts.builtin_loss = BuiltinLoss{LossKind::Mse, out_name, "target"};
  std::unique_ptr<Model> train = load_model(path);
  TrainingGraph tg = build_training_graph(*train, opts);
  EXPECT_EQ(verify(*train->graph), std::vector<std::string>{});
  EXPECT_EQ(tg.loss, "loss");
  std::vector<Tensor> outs = Interpreter().run(*train->graph, inputs);
  ASSERT_EQ(outs.size(), 1 + tg.params.size());

  // Parameters are inputs of the training graph, so its loss output evaluated
  // at perturbed parameters gives the differences.
  std::mt19937 pick(seed + 1);
  int checked = 0;
  for (size_t p = 0; p < tg.params.size(); ++p) {
    const Tensor& grad = outs[1 + p];
    Value* w = train->graph->find_local(tg.params[p]);
    Tensor orig = w->initializer();
    double scale = 0;
    for (int64_t i = 0; i < grad.numel(); ++i) scale = std::max(scale, std::abs(grad.get_f64(i)));
    for (int k = 0; k < 3; ++k) {
      int64_t i = std::uniform_int_distribution<int64_t>(0, orig.numel() - 1)(pick);
      auto loss_at = [&](double delta) {
        Tensor t = orig.clone();
        t.set_f64(i, orig.get_f64(i) + delta);
        std::map<std::string, Tensor> in = inputs;
        in[tg.params[p]] = t;
        return Interpreter().run(*train->graph, in)[0].get_f64(0);
      };
      const double h = 1e-3;
      double numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
      EXPECT_NEAR(grad.get_f64(i), numeric, 2e-2 * std::abs(numeric) + 2e-3 * scale)
          << name << ": d loss / d " << tg.params[p] << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Autodiff, MlpFixtureGradients) { check_fixture("mlp", {4, 32}, 11); }
TEST(Autodiff, Gpt2BlockFixtureGradients) { check_fixture("gpt2_block", {2, 5, 64}, 13); }
TEST(Autodiff, ResNetFixtureGradients) { check_fixture("resnet_small", {2, 3, 32, 32}, 17); }

TEST(Autodiff, SgdStepLowersMlpLoss) {
  std::string path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/mlp.onnx";
  std::unique_ptr<Model> m = load_model(path);
  TrainOptions opts;
  opts.builtin_loss = BuiltinLoss{LossKind::Mse, "output", "target"};
  opts.optimizer.kind = OptimizerKind::Sgd;
  TrainingGraph tg = build_training_graph(*m, opts);
  EXPECT_EQ(tg.lr, "lr");
  EXPECT_EQ(tg.step, "");
  std::mt19937 rng(5);
  std::normal_distribution<double> dist(0.0, 1.0);
  Tensor x(DType::F32, {8, 32}), target(DType::F32, {8, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, dist(rng));
  for (int64_t i = 0; i < target.numel(); ++i) target.set_f64(i, dist(rng));
  std::map<std::string, Tensor> inputs{{"input", x}, {"target", target}, {"lr", Tensor::scalar_f32(0.05f)}};
  const Graph& g = *m->graph;
  // Backward nodes name the forward node they differentiate.
  int fc2_grads = 0;
  for (const auto& n : g.nodes()) fc2_grads += n->name().rfind("grad/fc2/Gemm/", 0) == 0;
  EXPECT_GE(fc2_grads, 3);  // dA, dB and dC
  std::vector<Tensor> first = Interpreter().run(g, inputs);
  ASSERT_EQ(g.outputs().size(), 1 + tg.params.size());
  for (size_t p = 0; p < tg.params.size(); ++p) {
    EXPECT_EQ(g.outputs()[1 + p]->name(), tg.params[p] + ".updated");
    inputs[tg.params[p]] = first[1 + p];
  }
  std::vector<Tensor> second = Interpreter().run(g, inputs);
  EXPECT_LT(second[0].get_f64(0), first[0].get_f64(0) - 1e-3);
}

// One update of w = [0.5, -1] under loss = sum(w * [2, -3]) (gradient [2, -3])
// from a given state, against the formulas of torch.optim written out here.
TEST(Autodiff, OptimizerUpdatesMatchHandComputed) {
  const char* text = R"(graph main opset(ai.onnx: 17) {
  const %w: f32[2] = [0.5, -1.0]
  const %c: f32[2] = [2.0, -3.0]
  %p: f32[2] = Mul(%w, %c)
  %loss: f32[] = ReduceSum(%p) {keepdims = 0}
  output %loss
}
)";
  const double w[2] = {0.5, -1.0}, g[2] = {2.0, -3.0}, m[2] = {0.1, 0.2}, v[2] = {0.3, 0.05};
  const double lr = 0.01, t = 3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  for (OptimizerKind kind : {OptimizerKind::Momentum, OptimizerKind::Adam, OptimizerKind::AdamW}) {
    std::unique_ptr<Model> model = parse_model(text);
    TrainOptions opts;
    opts.loss_output = "loss";
    opts.optimizer.kind = kind;
    TrainingGraph tg = build_training_graph(*model, opts);
    std::map<std::string, Tensor> inputs{{"lr", Tensor::scalar_f32(static_cast<float>(lr))},
                                         {"w.m", Tensor::from_f32({0.1f, 0.2f}, {2})}};
    if (kind != OptimizerKind::Momentum) {
      inputs["step"] = Tensor::scalar_f32(static_cast<float>(t));
      inputs["w.v"] = Tensor::from_f32({0.3f, 0.05f}, {2});
    }
    std::vector<Tensor> outs = Interpreter().run(*model->graph, inputs);
    std::vector<std::string> names;
    for (const Value* o : model->graph->outputs()) names.push_back(o->name());
    for (int i = 0; i < 2; ++i) {
      double expect_w, expect_m, expect_v = 0;
      if (kind == OptimizerKind::Momentum) {
        expect_m = 0.9 * m[i] + g[i];
        expect_w = w[i] - lr * expect_m;
      } else {
        double base = kind == OptimizerKind::AdamW ? w[i] * (1 - lr * wd) : w[i];
        expect_m = b1 * m[i] + (1 - b1) * g[i];
        expect_v = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double mhat = expect_m / (1 - std::pow(b1, t)), vhat = expect_v / (1 - std::pow(b2, t));
        expect_w = base - lr * mhat / (std::sqrt(vhat) + eps);
      }
      SCOPED_TRACE(optimizer_name(kind));
      ASSERT_EQ(names[1], "w.updated");
      ASSERT_EQ(names[2], "w.m.updated");
      EXPECT_NEAR(outs[1].get_f64(i), expect_w, 1e-6);
      EXPECT_NEAR(outs[2].get_f64(i), expect_m, 1e-6);
      if (kind != OptimizerKind::Momentum) {
        ASSERT_EQ(names[3], "w.v.updated");
        EXPECT_NEAR(outs[3].get_f64(i), expect_v, 1e-6);
      }
    }
  }
}

std::string error_of(const std::string& text, TrainOptions opts) {
  std::unique_ptr<Model> m = parse_model(text, "m.tir");
  return input_error([&] { build_training_graph(*m, opts); });
}

// Float initializers that only configure an op (Resize's roi and scales,
// Dropout's ratio) are not parameters; one a data slot also reads is.
TEST(Autodiff, ConfigurationInitializersAreNotParameters) {
  const char* text = R"(graph main opset(ai.onnx: 18) {
  input %x: f32[b, 2, 5]
  const %w: f32[2, 1] = [0.5, 1.5]
  const %roi: f32[0] = []
  const %scales: f32[3] = [1.0, 1.0, 1.5]
  const %ratio: f32[] = [0.25]
  %y: f32[b, 2, 5] = Mul(%x, %w) name("scale")
  %r: f32[b, 2, 7] = Resize(%y, %roi, %scales) {mode = "nearest"} name("resize")
  %d: f32[b, 2, 7] = Dropout(%r, %ratio) name("dropout")
  %s: f32[b, 2, 7] = Mul(%d, %ratio) name("times_ratio")
  %loss: f32[] = ReduceSum(%s) {keepdims = 0} name("sum")
  output %loss
}
)";
  std::unique_ptr<Model> m = parse_model(text);
  TrainOptions opts;
  opts.loss_output = "loss";
  TrainingGraph tg = build_training_graph(*m, opts);
  EXPECT_EQ(tg.params, (std::vector<std::string>{"w", "ratio"}));
}

TEST(Autodiff, InputErrors) {
  const char* no_rule = R"(graph main opset(ai.onnx: 17) {
  const %w: f32[3] = [0.5, -1.0, 2.0]
  %s: f32[u] = Unique(%w) name("/wrap/Unique")
  %loss: f32[] = ReduceSum(%s) {keepdims = 0}
  output %loss
}
)";
  TrainOptions opts;
  opts.loss_output = "loss";
  std::string e = error_of(no_rule, opts);
  EXPECT_NE(e.find("/wrap/Unique"), std::string::npos) << e;
  EXPECT_NE(e.find("tcc has no gradient rule for Unique, which lies between a parameter and the loss"),
            std::string::npos) << e;
  const char* same_pads = R"(graph main opset(ai.onnx: 17) {
  input %x: f32[1, 2, 4, 4]
  const %w: f32[2, 1, 1, 1] = [2.0, 3.0]
  %c: f32[1, 2, 4, 4] = Conv(%x, %w) {group = 2, auto_pad = "SAME_UPPER"} name("conv")
  %loss: f32[] = ReduceSum(%c) {keepdims = 0}
  output %loss
}
)";
  e = error_of(same_pads, opts);
  EXPECT_NE(e.find("'conv'"), std::string::npos) << e;
  EXPECT_NE(e.find("tcc differentiates windows with explicit pads, not auto_pad SAME_UPPER"), std::string::npos) << e;
  opts.loss_output = "nope";
  EXPECT_NE(error_of(no_rule, opts).find("--loss 'nope' is not an output of the model (outputs: loss)"),
            std::string::npos);
  opts.loss_output = "loss";
  opts.param_patterns = {"v*"};
  EXPECT_NE(error_of(no_rule, opts).find("--params 'v*' matches no float initializer"), std::string::npos);
  const char* vector_loss = R"(graph main opset(ai.onnx: 17) {
  const %w: f32[2] = [0.5, -1.0]
  %loss: f32[2] = Neg(%w)
  output %loss
}
)";
  opts.param_patterns.clear();
  EXPECT_NE(error_of(vector_loss, opts).find("the loss 'loss' must be a float scalar, got f32[2]"),
            std::string::npos);
}

TEST(Autodiff, GlobMatch) {
  EXPECT_TRUE(glob_match("*", "fc1.weight"));
  EXPECT_TRUE(glob_match("fc?.weight", "fc1.weight"));
  EXPECT_TRUE(glob_match("*.bias", "h.0.attn.c_attn.bias"));
  EXPECT_FALSE(glob_match("*.bias", "h.0.attn.c_attn.bias.x"));
  EXPECT_TRUE(glob_match("h.*.ln_*", "h.0.ln_1.weight"));
  EXPECT_FALSE(glob_match("fc1", "fc1.weight"));
}

// The compiled-optimizer documents' run: Adam over ten Linear layers with a
// LinearLR schedule, in torch's frames (the forward, frame 0; opt.step's
// wrapper, frame 1, which breaks; Adam.step, frame 2). A tensor lr compiles the
// step once; an lr passed as a Python float recompiles it for each of its 6
// distinct values under the documents' torch (--torch-version 2.3,
// specialize_float=True), its guard named as torch's optimizer frame names it.
TEST(Autodiff, ExplainTrainLrSchedule) {
  std::string dir = std::string(TCC_SOURCE_DIR) + "/examples/train_linear10/";
  std::string base = "explain " + shell_quote(dir + "model.tir") + " --trace " + shell_quote(dir + "trace.jsonl") +
                     " --train --loss-fn mse --loss-on y --label target --optimizer adam --format json";
  CliResult tensor = run_tcc(base);
  ASSERT_EQ(tensor.code, 0) << tensor.output;
  auto j = nlohmann::json::parse(tensor.output);
  EXPECT_EQ(j["compiles"], 2);
  EXPECT_EQ(j["recompile_count"], 0);
  EXPECT_EQ(j["graph_break_count"], 1);
  EXPECT_EQ(j["graph_breaks"][0]["reason"], "optimizer_step");
  CliResult scalar = run_tcc(base + " --lr-as-scalar --torch-version 2.3");
  ASSERT_EQ(scalar.code, 0) << scalar.output;
  j = nlohmann::json::parse(scalar.output);
  EXPECT_EQ(j["compiles"], 7);
  EXPECT_EQ(j["recompile_count"], 5);
  EXPECT_EQ(j["recompiles"][0]["reasons"][0],
            "2/0: L['self'].param_groups[0]['lr'] == 0.003333333333333333 (now 0.004666666666666667)");
  CliResult text = run_tcc("explain " + shell_quote(dir + "model.tir") + " --trace " + shell_quote(dir + "trace.jsonl") +
                           " --train --loss-fn mse --loss-on y --label target --optimizer adam --lr-as-scalar --torch-version 2.3");
  EXPECT_NE(text.output.find("hold 'lr' in a tensor input: 2 compiles instead of 7 compiles"), std::string::npos)
      << text.output;
  CliResult no_train = run_tcc("explain " + shell_quote(dir + "model.tir") + " --optimizer adam");
  EXPECT_EQ(no_train.code, 2);
  EXPECT_NE(no_train.output.find("need --train"), std::string::npos) << no_train.output;
}

}  // namespace
}  // namespace tcc
