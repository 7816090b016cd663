// Generated kernels against the reference interpreter. Every model in
// tests/kernels/ goes through the fuse pipeline and the schedule; the host
// library emit_host prints for all of them is compiled once, and each kernel
// step runs on random inputs next to Interpreter::eval_node on its fusion node.
// The CUDA of the same models and of the bundled fixtures compiles with NVRTC.
//
// Tolerances (absolute + relative to the reference): f32 1e-5 + 1e-5 (kernels
// compute f32 in float, the interpreter in double); f16 and bf16 1e-2 + 1e-2
// (kernels keep f16 values in float between ops, the interpreter rounds after
// each op); f64 1e-12 + 1e-12; integers and bools exactly.
#include <gtest/gtest.h>


#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "codegen/emit.h"
#include "codegen/schedule.h"
#include "codegen/toolchain.h"
#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/interp/interpreter.h"
#include "src/module/shared_library.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

struct CompiledModel {
  std::string file;
  std::unique_ptr<Model> model;
  Schedule schedule;
  std::map<std::string, int64_t> sizes;  // from the model's "// SIZES: b=3 s=5" line
};

std::vector<fs::path> files_in(const std::string& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(std::string(TCC_SOURCE_DIR) + "/" + dir))
    if (e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, int64_t> sizes_of(const fs::path& file) {
  std::ifstream in(file);
  std::map<std::string, int64_t> sizes;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("// SIZES:", 0) != 0) continue;
    std::istringstream words(line.substr(9));
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      sizes[w.substr(0, eq)] = std::stoll(w.substr(eq + 1));
    }
  }
  return sizes;
}

// Loads a model and runs the pipeline through fusion, then schedules it.
CompiledModel fuse_and_schedule(const fs::path& file) {
  CompiledModel c;
  c.file = file.filename().string();
  c.model = load_model(file.string());
  infer_shapes(*c.model->graph);
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream report;
  PassManager(build_pipeline("", Phase::Fuse), options, report).run(*c.model);
  c.schedule = build_schedule(*c.model->graph);
  c.sizes = sizes_of(file);
  return c;
}

std::vector<int64_t> concrete(const std::vector<SymExpr>& shape, const std::map<std::string, int64_t>& sizes) {
  std::vector<int64_t> out;
  for (const SymExpr& d : shape) {
    std::optional<int64_t> v = d.evaluate(sizes);
    EXPECT_TRUE(v.has_value()) << "no size for " << d.str();
    out.push_back(v.value_or(1));
  }
  return out;
}

Tensor random_tensor(DType t, std::vector<int64_t> shape, std::mt19937& rng) {
  Tensor x(t, std::move(shape));
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::uniform_int_distribution<int64_t> integer(-9, 9);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (is_float(t)) x.set_f64(i, real(rng));
    else if (t == DType::Bool) x.set_i64(i, integer(rng) > 0);
    else x.set_i64(i, integer(rng));
  }
  return x;
}

// Random contents of v's type at the given sizes.
Tensor random_value(const Value& v, const std::map<std::string, int64_t>& sizes, std::mt19937& rng) {
  std::vector<SymExpr> shape;
  for (const Dim& d : v.type().shape()) shape.push_back(d.expr());
  return random_tensor(v.type().dtype(), concrete(shape, sizes), rng);
}

std::map<std::string, Tensor> random_graph_inputs(const Graph& g, const std::map<std::string, int64_t>& sizes,
                                                  std::mt19937& rng) {
  std::map<std::string, Tensor> in;
  for (const Value* v : g.inputs())
    if (!v->is_initializer()) in.emplace(v->name(), random_value(*v, sizes, rng));
  return in;
}

// Element i of both tensors agree within the dtype's tolerance (header comment).
bool close(const Tensor& got, const Tensor& want, int64_t i) {
  DType t = want.dtype();
  if (!is_float(t)) return got.get_i64(i) == want.get_i64(i);
  double a = got.get_f64(i), b = want.get_f64(i);
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  double tol = t == DType::F32 ? 1e-5 : t == DType::F64 ? 1e-12 : 1e-2;
  return std::fabs(a - b) <= tol + tol * std::fabs(b);
}

class KernelNumerics : public TempDirSuite {
 protected:
  static void SetUpTestSuite() {
    TempDirSuite::SetUpTestSuite();
    models_ = new std::vector<CompiledModel>();
    for (const fs::path& f : files_in("tests/kernels", ".tir")) models_->push_back(fuse_and_schedule(f));
    // One library for every model: kernels take a per-model prefix, since
    // each schedule numbers its kernels from 0.
    std::vector<kir::Kernel> all;
    for (size_t m = 0; m < models_->size(); ++m)
      for (kir::Kernel k : (*models_)[m].schedule.kernels) {
        k.name = prefix(m) + k.name;
        all.push_back(std::move(k));
      }
    std::ofstream(suite_dir_ / "host.cc") << emit_host(all);
    compile_host_library((suite_dir_ / "host.cc").string(), (suite_dir_ / "host.so").string());
    lib_ = new SharedLibrary((suite_dir_ / "host.so").string());
  }
  static void TearDownTestSuite() {
    delete lib_;
    delete models_;
    TempDirSuite::TearDownTestSuite();
  }
  static std::string prefix(size_t m) { return "m" + std::to_string(m) + "_"; }

  static std::vector<CompiledModel>* models_;
  static SharedLibrary* lib_;
};

std::vector<CompiledModel>* KernelNumerics::models_ = nullptr;
SharedLibrary* KernelNumerics::lib_ = nullptr;

TEST_F(KernelNumerics, EveryFusionPatternBecomesKernels) {
  std::set<kir::Kind> kinds;
  for (const CompiledModel& c : *models_) {
    size_t steps = std::count_if(c.schedule.steps.begin(), c.schedule.steps.end(),
                                 [](const Step& s) { return s.kind == Step::Kind::Kernel; });
    EXPECT_GT(steps, 0u) << c.file;
    EXPECT_EQ(steps, c.schedule.steps.size()) << c.file << " has host fallbacks";
    for (const kir::Kernel& k : c.schedule.kernels) kinds.insert(k.kind);
  }
  EXPECT_EQ(kinds, (std::set<kir::Kind>{kir::Kind::Pointwise, kir::Kind::Reduction, kir::Kind::Gemm, kir::Kind::Conv,
                                        kir::Kind::Attention, kir::Kind::TopK, kir::Kind::Recurrence,
                                        kir::Kind::Nms, kir::Kind::RoiAlign}));
}

TEST_F(KernelNumerics, HostKernelsMatchTheInterpreter) {
  for (size_t m = 0; m < models_->size(); ++m) {
    const CompiledModel& c = (*models_)[m];
    SCOPED_TRACE(c.file);
    std::mt19937 rng(static_cast<uint32_t>(1234 + m));
    // A whole run binds the model's symbols, which tcc::Reshape and friends
    // read; the random ops draw at a random offset other than 0 (a module's
    // third call), which the kernels read through their offset argument.
    uint64_t offset = 2;
    Interpreter interp;
    interp.set_random_offset(offset);
    interp.run(*c.model->graph, random_graph_inputs(*c.model->graph, c.sizes, rng));
    for (const Step& step : c.schedule.steps) {
      if (step.kind != Step::Kind::Kernel) continue;
      const kir::Kernel& k = c.schedule.kernels.at(step.kernel);
      SCOPED_TRACE(step.node + " (" + k.name + ")");
      const Node* node = nullptr;
      for (const auto& n : c.model->graph->nodes())
        if (n->name() == step.node) node = n.get();
      ASSERT_NE(node, nullptr);
      ASSERT_EQ(step.reads.size() + node->num_outputs(), k.buffers.size());
      // The node's inputs (some of which a kernel may not read: the attention
      // statistics pass reads no Q, K, V or mask), then its outputs.
      std::vector<Tensor> tensors;
      for (const Value* v : node->inputs())
        tensors.push_back(v->is_initializer() ? v->initializer() : random_value(*v, c.sizes, rng));
      std::vector<const Tensor*> inputs;
      for (const Tensor& t : tensors) inputs.push_back(&t);
      std::vector<Tensor> want = interp.eval_node(*node, inputs);
      for (size_t b = step.reads.size(); b < k.buffers.size(); ++b)
        tensors.emplace_back(k.buffers[b].dtype, concrete(k.buffers[b].shape, c.sizes));
      // The kernel's arguments: the inputs it reads, named by the step, then the outputs.
      std::vector<void*> buffers;
      for (const std::string& read : step.reads)
        for (size_t i = 0; i < node->num_inputs(); ++i)
          if (node->input(i)->name() == read) {
            buffers.push_back(tensors[i].raw_mut());
            break;
          }
      ASSERT_EQ(buffers.size(), step.reads.size());
      for (size_t o = 0; o < node->num_outputs(); ++o) buffers.push_back(tensors[node->num_inputs() + o].raw_mut());
      if (kir::draws_random(k)) buffers.push_back(&offset);
      std::vector<int64_t> sizes;
      for (const std::string& s : k.size_params) sizes.push_back(c.sizes.at(s));
      auto fn = reinterpret_cast<HostKernelFn>(lib_->symbol(prefix(m) + k.name));
      ASSERT_NE(fn, nullptr);
      fn(buffers.data(), sizes.data());
      ASSERT_EQ(want.size(), node->num_outputs());
      for (size_t o = 0; o < want.size(); ++o) {
        const Tensor& got = tensors[node->num_inputs() + o];
        ASSERT_EQ(got.shape(), want[o].shape()) << "output " << o;
        ASSERT_GT(got.numel(), 0);
        int64_t bad = 0;
        for (int64_t i = 0; i < got.numel(); ++i)
          if (!close(got, want[o], i) && bad++ < 5)
            ADD_FAILURE() << "output " << o << " element " << i << ": kernel " << got.get_f64(i) << ", interpreter "
                          << want[o].get_f64(i);
        EXPECT_EQ(bad, 0) << "output " << o << ": " << bad << " of " << got.numel() << " elements differ";
      }
    }
  }
}

// Every generated kernel of the test models and the bundled fixtures compiles
// for sm_90 and is defined in the cubin.
TEST(KernelNvrtc, ModelsAndFixturesCompile) {
  std::vector<fs::path> files = files_in("tests/kernels", ".tir");
  for (const fs::path& f : files_in("tests/fixtures", ".onnx")) files.push_back(f);
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.filename().string());
    CompiledModel c = fuse_and_schedule(f);
    auto start = std::chrono::steady_clock::now();
    std::vector<CudaBinary> bins = compile_cuda(emit_cuda(c.schedule.kernels), {"sm_90"}, false, 1);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(bins.size(), 1u);
    std::vector<std::string> syms = cubin_symbols(bins[0].bytes);
    std::set<std::string> defined(syms.begin(), syms.end());
    size_t generated = 0;
    for (const kir::Kernel& k : c.schedule.kernels) {
      bool is_generated = k.kind != kir::Kind::Gemm && k.kind != kir::Kind::Conv;  // library calls
      generated += is_generated;
      EXPECT_EQ(defined.count(k.name), is_generated ? 1u : 0u) << k.name;
    }
    std::printf("[ nvrtc    ] %-24s %2zu kernels (%zu generated) in %.0f ms\n", c.file.c_str(),
                c.schedule.kernels.size(), generated, ms);
  }
}

}  // namespace
}  // namespace tcc
