// Gradient checks the autodiff tests share: random weights written into a
// model's text, the loss through the reference interpreter, and every
// parameter's gradient against central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "src/autodiff/autodiff.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/ir/verifier.h"

namespace tcc {

// Replaces each `$R` with a list of random values in [-1, 1], as many as the
// type just before it on the line declares (`const %w: f64[2, 3] = $R`).
inline std::string fill_random(std::string text, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (size_t at = text.find("$R"); at != std::string::npos; at = text.find("$R")) {
    size_t close = text.rfind(']', at), open = text.rfind('[', close);
    std::stringstream dims(text.substr(open + 1, close - open - 1));
    int64_t count = 1;
    for (std::string d; std::getline(dims, d, ',');) count *= std::stoll(d);
    std::string lit = "[";
    for (int64_t i = 0; i < count; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", dist(rng));
      std::string v = buf;
      if (v.find_first_of(".e") == std::string::npos) v += ".0";
      lit += (i ? ", " : "") + v;
    }
    text.replace(at, 2, lit + "]");
  }
  return text;
}

// A forward graph around `body`, which computes %y of type `ytype` from
// parameters named w*: the loss is sum(y * r) for a random r, so every
// element of the incoming gradient differs.
inline std::string wrap(const std::string& decls, const std::string& body, const std::string& ytype, int opset = 17) {
  return "graph main opset(ai.onnx: " + std::to_string(opset) + ") {\n" + decls + "  const %r: " + ytype +
         " = $R\n" + body + "  %p: " + ytype + " = Mul(%y, %r)\n  %loss: f64[] = ReduceSum(%p) {keepdims = 0}\n" +
         "  output %loss\n}\n";
}

inline double loss_of(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  Interpreter interp;
  std::vector<Tensor> outs = interp.run(g, inputs);
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (g.outputs()[i]->name() == "loss") return outs[i].get_f64(0);
  ADD_FAILURE() << "no loss output";
  return 0;
}

struct FdOptions {
  double h = 1e-6;
  double tol = 1e-6;    // |autodiff - fd| <= tol * (1 + |fd|)
  int max_elements = 64;  // checked per parameter (spread over the tensor)
};

// Builds the training graph of `text` (loss output `loss`), then checks each
// parameter's gradient against central differences of the forward model.
inline void check_gradients(const std::string& text, const std::map<std::string, Tensor>& inputs = {},
                     TrainOptions opts = {}, FdOptions fd = {}) {
  std::unique_ptr<Model> fwd = parse_model(text);
  std::unique_ptr<Model> train = parse_model(text);
  if (!opts.builtin_loss) opts.loss_output = "loss";
  if (opts.param_patterns.empty()) opts.param_patterns = {"w*"};
  TrainingGraph tg = build_training_graph(*train, opts);
  ASSERT_FALSE(tg.params.empty());
  EXPECT_EQ(verify(*train->graph), std::vector<std::string>{});
  Interpreter interp;
  std::vector<Tensor> outs = interp.run(*train->graph, inputs);
  ASSERT_EQ(outs.size(), 1 + tg.params.size());
  EXPECT_NEAR(outs[0].get_f64(0), loss_of(*fwd->graph, inputs), 1e-9 * (1 + std::abs(outs[0].get_f64(0))));
  for (size_t p = 0; p < tg.params.size(); ++p) {
    const std::string& name = tg.params[p];
    EXPECT_EQ(train->graph->outputs()[1 + p]->name(), "grad_" + name);
    const Tensor& grad = outs[1 + p];
    Value* w = fwd->graph->find_local(name);
    ASSERT_TRUE(w && w->is_initializer()) << name;
    Tensor orig = w->initializer();
    ASSERT_EQ(grad.shape(), orig.shape()) << name;
    int64_t stride = std::max<int64_t>(1, orig.numel() / fd.max_elements);
    for (int64_t i = 0; i < orig.numel(); i += stride) {
      auto loss_at = [&](double delta) {
        Tensor t = orig.clone();
        t.set_f64(i, orig.get_f64(i) + delta);
        w->set_initializer(t);
        return loss_of(*fwd->graph, inputs);
      };
      double numeric = (loss_at(fd.h) - loss_at(-fd.h)) / (2 * fd.h);
      EXPECT_NEAR(grad.get_f64(i), numeric, fd.tol * (1 + std::abs(numeric)))
          << "d loss / d " << name << "[" << i << "]";
    }
    w->set_initializer(orig);
  }
}

}  // namespace tcc
