// tcc_conformance: runs the ONNX node conformance tests against tcc's
// reference interpreter, or against modules tcc compiles.
//
// Usage: tcc_conformance [--dir DIR] [--exclusions FILE] [--filter SUBSTRING] [--verbose]
//                        [--compiled TCC [--host-steps FILE] [--on-gpu]] [--shard I/N]
//   e.g. build-x/tests/conformance/tcc_conformance --filter test_conv --verbose
//
// DIR holds one folder per test (model.onnx, test_data_set_N/input_K.pb and
// output_K.pb), as the onnx wheel ships them; CMake finds or generates it
// (node_tests.py) and compiles it in as the default. A graph input or output
// that is a sequence or an optional of tensors is a SequenceProto or
// OptionalProto file, run as the interpreter's sequence and optional values.
//
// A test is supported when the model's default-domain opset is 13..23 (or
// older, when every node's op is defined at 13 as at the model's opset: ONNX's
// schema at 13 dates from no later than the model's opset; such a model runs
// as opset 13, a copy of it with that opset import), its graph inputs and outputs are tensors, sequences or optionals, and every
// node, regions included, has an OpDef whose dtypes allow the dtypes of the
// node's tensors, and no attribute that lists TypeProtos (tcc's IR holds one type, Optional's); other
// tests are skipped and their reasons counted. Supported
// tests are loaded with load_model, shaped with infer_shapes and run by the
// Interpreter on every data set; outputs are compared with the ONNX backend
// tolerances (|actual - expected| <= atol + rtol * |expected|, rtol 1e-3,
// atol 1e-7; exact for integers, bools and strings; NaN equals NaN).
// Tests named in the exclusions file (`test_name  reason` per line) are reported,
// not run.
//
// With --compiled TCC, each supported test is compiled by that tcc binary
// (`tcc compile`, one cubin architecture and host kernels, so NVRTC takes every
// kernel's CUDA too) and the module's host run (tcc_module_run_host: the
// generated kernels, lowering, fusion and memory plan) is compared instead of
// the interpreter's, with the same tolerances. A model compile refuses (exit 2)
// is skipped with its message as the reason; any other compile failure fails.
// A module that runs on the host, for want of a kernel, an op to which `tcc
// ops` gives a GPU path fails the test unless the host-steps file (`test_name
// reason` per line) lists it with the reason, and a listed test whose module
// runs every such op on the GPU fails too, so that the list stays true; the
// per-op table counts each op's tests with a host step of any kind.
// An integer input whose values decide a shape or a kernel's constants (a
// Reduce's axes), or a float one that decides a shape (a Resize's scales), is
// compiled for the data set's values (`--specialize`), which the module
// guards: a data set of other values gets its own module.
// A model with a sequence or optional graph input is compiled for the
// structure of the first data set's values (`--shape-hint xs=seq(N)`, each
// element's shape, `opt=present` / `absent`), a data set of another structure
// for its own; the module's flattened tensors are fed and its outputs
// assembled back through manifest.json's structure (CompiledModule).
// With --on-gpu the module runs on the GPU instead (tcc_module_run_cuda on
// device copies of the inputs): the generated CUDA kernels, cuBLASLt and
// cuDNN against the same expected outputs; without a GPU the run is skipped.
// --shard I/N takes every N-th test from the I-th (0-based), so that ctest runs
// shards side by side.
//
// Exit code: 0 when no supported, non-excluded test failed; 1 when one did;
// 2 for bad usage or a bad exclusions file; 77 when DIR does not exist (ctest
// reports the test as skipped: onnx is not installed).
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "frontends/load_model.h"
#include "src/analysis/trace.h"
#include "src/interp/interpreter.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"
#include "src/module/structured_values.h"
#include "tests/conformance/compiled_module.h"
#include "tests/conformance/test_data.h"

namespace fs = std::filesystem;

namespace tcc::conformance {
namespace {

constexpr int kExitSkipped = 77;

struct Options {
  std::string dir = TCC_ONNX_NODE_DIR;
  std::string exclusions = TCC_CONFORMANCE_EXCLUSIONS;
  std::string host_steps = TCC_CONFORMANCE_HOST_STEPS;
  std::string filter;
  bool verbose = false;
  std::string compiled;  // a tcc binary: compare its modules' host runs
  bool on_gpu = false;   // with `compiled`: their GPU runs
  int shard = 0, shards = 1;
};

enum class Outcome { Passed, Failed, Skipped, Excluded };

struct Result {
  std::string test;
  std::string op;  // the op the test is about, for the per-op table
  Outcome outcome = Outcome::Passed;
  std::string detail;  // failure message, skip reason or exclusion reason
  // With --compiled: the ops of the module's host steps (fallback steps of
  // its schedule, not the binding steps that run once per binding of sizes),
  // and of those the ops `tcc ops` gives a GPU path that ran on the host for
  // want of a kernel (not because their output's size depends on data).
  std::set<std::string> host_ops, missed_gpu_paths;
};

std::string onnx_dtype_name(int32_t onnx_type) {
  if (auto d = dtype_from_onnx(onnx_type)) return std::string(dtype_name(*d));
  // The ONNX 1.12 protobuf tcc links predates float8, int4 and float4: name those by number.
  std::string name = onnx::TensorProto_DataType_IsValid(onnx_type)
                         ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type))
                         : "";
  return name.empty() ? "ONNX type " + std::to_string(onnx_type) : name;
}

std::string op_label(const std::string& domain, const std::string& op) {
  return (domain.empty() || domain == "ai.onnx") ? op : domain + "." + op;
}

// Whether the runner reads and compares values of this type: tensors, and
// sequences and optionals of them (an optional may hold a sequence).
bool readable_type(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: return true;
    case onnx::TypeProto::kSequenceType: return t.sequence_type().elem_type().has_tensor_type();
    case onnx::TypeProto::kOptionalType:
      return !t.optional_type().elem_type().has_optional_type() && readable_type(t.optional_type().elem_type());
    default: return false;
  }
}

// Why a model cannot be run by tcc, judged from the protobuf alone so that the
// verdict does not depend on the importer. Empty when it looks supported; the
// dtypes of values the file leaves untyped are checked after shape inference.
class SupportCheck {
 public:
  explicit SupportCheck(const onnx::ModelProto& m) {
    for (const auto& o : m.opset_import()) opsets_[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  }

  std::string why_unsupported(const onnx::ModelProto& m) {
    auto it = opsets_.find("");
    if (it == opsets_.end()) return "no default-domain opset";
    if (it->second < kMinOpset && unchanged_since(m.graph(), it->second)) it->second = kMinOpset;
    if (it->second < kMinOpset || it->second > kMaxOpset)
      return "opset " + std::to_string(it->second) + " outside " + std::to_string(kMinOpset) + ".." +
             std::to_string(kMaxOpset);
    for (const auto& v : m.graph().input())
      if (!readable_type(v.type())) return "graph input '" + v.name() + "' is no tensor, sequence or optional of tensors";
    for (const auto& v : m.graph().output())
      if (!readable_type(v.type())) return "graph output '" + v.name() + "' is no tensor, sequence or optional of tensors";
    std::vector<std::unordered_map<std::string, int32_t>> scopes;
    return check_graph(m.graph(), scopes);
  }

 private:
  // Whether every default-domain node of g (regions included) has the
  // definition at kMinOpset that it has at `opset`.
  static bool unchanged_since(const onnx::GraphProto& g, int64_t opset) {
    for (const auto& n : g.node()) {
      if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
      const auto* schema = ONNX_NAMESPACE::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(kMinOpset), "");
      if (schema == nullptr || schema->since_version() > opset) return false;
      for (const auto& a : n.attribute())
        if (a.has_g() && !unchanged_since(a.g(), opset)) return false;
    }
    return true;
  }

  std::string check_graph(const onnx::GraphProto& g, std::vector<std::unordered_map<std::string, int32_t>>& scopes) {
    scopes.emplace_back();
    auto& types = scopes.back();
    auto note = [&](const onnx::ValueInfoProto& v) {
      if (v.type().has_tensor_type() && v.type().tensor_type().elem_type() != 0)
        types[v.name()] = v.type().tensor_type().elem_type();
    };
    for (const auto& v : g.input()) note(v);
    for (const auto& v : g.output()) note(v);
    for (const auto& v : g.value_info()) note(v);
    for (const auto& t : g.initializer()) types[t.name()] = t.data_type();
    std::string why;
    for (const auto& n : g.node()) {
      why = check_node(n, scopes);
      if (!why.empty()) break;
    }
    scopes.pop_back();
    return why;
  }

  std::optional<int32_t> type_of(const std::string& name,
                                 const std::vector<std::unordered_map<std::string, int32_t>>& scopes) const {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return std::nullopt;
  }

  std::string check_node(const onnx::NodeProto& n, std::vector<std::unordered_map<std::string, int32_t>>& scopes) {
    std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    auto op = opsets_.find(domain);
    std::string label = op_label(domain, n.op_type());
    if (op == opsets_.end()) return "op " + label + ": no opset imported for its domain";
    const OpDef* def = OpRegistry::get().lookup(domain, n.op_type(), op->second);
    if (!def) return "op " + label + " not supported";
    // A tensor attribute (Constant's or ConstantOfShape's value) gives the output its dtype.
    for (const auto& a : n.attribute())
      if (a.type() == onnx::AttributeProto::TENSOR && n.output_size() > 0)
        scopes.back()[n.output(0)] = a.t().data_type();
    std::vector<std::string> names(n.input().begin(), n.input().end());
    names.insert(names.end(), n.output().begin(), n.output().end());
    for (const std::string& name : names) {
      if (name.empty()) continue;
      auto t = type_of(name, scopes);
      if (!t) continue;
      std::string why = dtype_allowed(*def, label, *t);
      if (!why.empty()) return why;
    }
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::TYPE_PROTOS)
        return "op " + label + ": a list of TypeProtos ('" + a.name() + "'), which tcc's IR does not hold";
      std::string why;
      if (a.type() == onnx::AttributeProto::GRAPH) why = check_graph(a.g(), scopes);
      for (const auto& g : a.graphs())
        if (why.empty()) why = check_graph(g, scopes);
      if (!why.empty()) return why;
    }
    return "";
  }

 public:
  static std::string dtype_allowed(const OpDef& def, const std::string& label, int32_t onnx_type) {
    std::optional<DType> d = dtype_from_onnx(onnx_type);
    if (!d) return "op " + label + ": dtype " + onnx_dtype_name(onnx_type) + " not modeled by tcc";
    if (!def.dtypes.empty() && std::find(def.dtypes.begin(), def.dtypes.end(), *d) == def.dtypes.end())
      return "op " + label + ": dtype " + std::string(dtype_name(*d)) + " not supported";
    return "";
  }

 private:
  std::map<std::string, int64_t> opsets_;
};

// The dtypes of every node's tensors once shapes are inferred: catches
// intermediate values the file did not type.
std::string check_inferred_dtypes(const Graph& g) {
  for (const auto& n : g.nodes()) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (!def) return "op " + op_label(n->domain(), n->op_type()) + " not supported";
    std::vector<Value*> vals = n->inputs();
    vals.insert(vals.end(), n->outputs().begin(), n->outputs().end());
    for (const Value* v : vals) {
      if (!v || !v->type().is_tensor() || v->type().dtype() == DType::Undefined) continue;
      std::string why = SupportCheck::dtype_allowed(*def, op_label(n->domain(), n->op_type()),
                                                    static_cast<int32_t>(v->type().dtype()));
      if (!why.empty()) return why;
    }
    for (const Graph* r : n->regions()) {
      std::string why = check_inferred_dtypes(*r);
      if (!why.empty()) return why;
    }
  }
  return "";
}

std::string lowercase_alnum(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<onnx::ModelProto> read_model_proto(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto proto;
  if (!f || !proto.ParseFromIstream(&f)) return std::nullopt;
  return proto;
}

// The op a test is about. A one-node model is about its node. An "_expanded"
// test (the op's function body) is about the op of its one-node twin, the
// same name without the suffix. Other multi-node tests are about the longest
// op name that prefixes the test name, since ONNX names tests after the op.
std::string op_of_test(const fs::path& test_dir, const onnx::ModelProto& m) {
  const auto& nodes = m.graph().node();
  if (nodes.size() == 1) return op_label(nodes[0].domain(), nodes[0].op_type());
  std::string test = test_dir.filename().string();
  size_t expanded = test.find("_expanded");
  if (expanded != std::string::npos) {
    auto twin = read_model_proto(test_dir.parent_path() / test.substr(0, expanded) / "model.onnx");
    if (twin && twin->graph().node_size() == 1)
      return op_label(twin->graph().node(0).domain(), twin->graph().node(0).op_type());
  }
  std::string key = lowercase_alnum(test.substr(std::strlen("test_")));
  std::string best;
  auto consider = [&](const std::string& domain, const std::string& op) {
    std::string l = lowercase_alnum(op);
    if (key.rfind(l, 0) == 0 && l.size() > lowercase_alnum(best).size()) best = op_label(domain, op);
  };
  for (const OpDef* d : OpRegistry::get().all()) consider(d->domain, d->op_type);
  for (const auto& n : nodes) consider(n.domain(), n.op_type());
  if (best.empty() && !nodes.empty()) best = op_label(nodes[0].domain(), nodes[0].op_type());
  return best.empty() ? "(no nodes)" : best;
}

// The --specialize flags of the graph inputs (of at most kMaxSpecialized
// elements) whose values decide a shape or a kernel's constants: an op's
// shape_inputs, literal_inputs or config_inputs (a Reduce's axes,
// CenterCropPad's shape, DFT's axis, Range's bounds) that read integer ones,
// directly or through integer ops on them (an If or Loop through what its
// regions read), and the shape_inputs that read float ones (a Resize's
// scales), at their values in `feeds`. A float that only configures a kernel
// (a Pad's fill, a Resize's roi) stays an input the kernels read. Their
// modules are compiled for those values and guarded by them, as torch.compile
// specializes an int, or a float that reaches a size, and guards it.
std::vector<std::string> specializations(const Graph& g, const std::map<std::string, Tensor>& feeds) {
  constexpr int64_t kMaxSpecialized = 64;
  // The inputs each value is computed from: the numeric inputs themselves and
  // the integers computed from them.
  std::map<const Value*, std::set<std::string>> from;
  for (const Value* v : g.inputs()) {
    const Type& t = v->type();
    auto feed = feeds.find(v->name());
    if (!v->is_initializer() && t.is_tensor() && (is_integer(t.dtype()) || is_float(t.dtype())) && t.fully_static() &&
        feed != feeds.end() && feed->second.numel() <= kMaxSpecialized)
      from[v] = {v->name()};
  }
  // The inputs that the values a region reads from outside it are computed from.
  std::function<void(const Graph&, std::set<std::string>&)> captured = [&](const Graph& region,
                                                                           std::set<std::string>& roots) {
    for (const auto& inner : region.nodes()) {
      for (const Value* v : inner->inputs())
        if (auto it = from.find(v); it != from.end()) roots.insert(it->second.begin(), it->second.end());
      for (const Graph* nested : inner->regions()) captured(*nested, roots);
    }
  };
  std::set<std::string> deciding;
  for (const auto& n : g.nodes()) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    std::set<std::string> roots;
    for (const Graph* region : n->regions()) captured(*region, roots);
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      auto it = from.find(n->inputs()[i]);
      if (it == from.end()) continue;
      roots.insert(it->second.begin(), it->second.end());
      auto in = [i](const std::vector<size_t>& list) { return std::find(list.begin(), list.end(), i) != list.end(); };
      const bool integer = is_integer(n->inputs()[i]->type().dtype());
      if (def && (in(def->shape_inputs) || (integer && (in(def->literal_inputs) || in(def->config_inputs)))))
        deciding.insert(it->second.begin(), it->second.end());
    }
    if (roots.empty()) continue;
    for (const Value* out : n->outputs())
      if (out && out->type().is_tensor() && is_integer(out->type().dtype())) from[out] = roots;
  }
  std::vector<std::string> flags;
  for (const std::string& name : deciding) {
    const Tensor& t = feeds.at(name);
    std::string flag = name + "=";
    for (int64_t i = 0; i < t.numel(); ++i) flag += (i ? "," : "") + format_float(t.get_f64(i));
    flags.push_back(flag);
  }
  return flags;
}

// Loads, shapes and runs one supported test (with `tcc`, its compiled module,
// on the GPU with `on_gpu`); fills outcome and detail.
void run_supported(const fs::path& test_dir, const fs::path& model_path, const std::string& tcc, bool on_gpu,
                   Result& r) {
  std::unique_ptr<Model> model = load_model(model_path.string());
  infer_shapes(*model->graph);
  std::string why = check_inferred_dtypes(*model->graph);
  if (!why.empty()) {
    r.outcome = Outcome::Skipped;
    r.detail = why;
    return;
  }
  const Graph& g = *model->graph;
  std::vector<std::string> output_names;
  for (const Value* v : g.outputs()) output_names.push_back(v->name());
  // One module per structure and specialized values of the data sets' inputs (most tests have one).
  std::map<std::string, std::unique_ptr<CompiledModule>> modules;
  std::vector<const Value*> inputs;
  for (const Value* v : g.inputs())
    if (!v->is_initializer()) inputs.push_back(v);
  for (const fs::path& set : data_sets(test_dir)) {
    std::string where = set.filename().string() + ": ";
    std::vector<fs::path> in_files = numbered_files(set, "input_");
    std::vector<fs::path> out_files = numbered_files(set, "output_");
    if (in_files.size() != inputs.size()) {
      r.outcome = Outcome::Failed;
      r.detail = where + std::to_string(in_files.size()) + " input files for " + std::to_string(inputs.size()) +
                 " graph inputs";
      return;
    }
    std::map<std::string, Tensor> feeds;
    for (size_t k = 0; k < in_files.size(); ++k) feeds[inputs[k]->name()] = read_value_pb(in_files[k], inputs[k]->type());
    std::vector<Tensor> outs;
    if (tcc.empty()) {
      outs = Interpreter().run(g, feeds);
    } else {
      std::string hints = structure_hints(feeds);
      std::vector<std::string> specialize = specializations(g, feeds);
      std::string key = hints;
      for (const std::string& s : specialize) key += " " + s;
      std::unique_ptr<CompiledModule>& compiled = modules[key];
      if (!compiled) compiled = std::make_unique<CompiledModule>(tcc, model_path, hints, specialize, on_gpu);
      if (!compiled->refused().empty() || !compiled->failed().empty()) {
        r.outcome = compiled->refused().empty() ? Outcome::Failed : Outcome::Skipped;
        r.detail = compiled->refused().empty() ? compiled->failed() : compiled->refused();
        return;
      }
      r.host_ops.insert(compiled->host_ops().begin(), compiled->host_ops().end());
      r.missed_gpu_paths.insert(compiled->missed_gpu_paths().begin(), compiled->missed_gpu_paths().end());
      outs = compiled->run(feeds, output_names, on_gpu);
    }
    if (outs.size() != out_files.size()) {
      r.outcome = Outcome::Failed;
      r.detail = where + std::to_string(outs.size()) + " outputs, expected " + std::to_string(out_files.size());
      return;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      std::string mismatch = compare(read_value_pb(out_files[k], g.outputs()[k]->type()), outs[k]);
      if (!mismatch.empty()) {
        r.outcome = Outcome::Failed;
        r.detail = where + "output " + std::to_string(k) + " ('" + g.outputs()[k]->name() + "') " + mismatch;
        return;
      }
    }
  }
  r.outcome = Outcome::Passed;
}

// `tcc ops` promises a GPU path for an op whose gpu column is kernel or
// library. A compiled test whose module runs such an op on the host for want
// of a kernel (not because its output's size depends on data, which keeps any
// op on the host) must be listed in the host-steps file with the reason its
// module cannot keep the promise, and a listed test must still break it.
void check_host_steps(Result& r, const std::map<std::string, std::string>& host_steps) {
  if (r.outcome != Outcome::Passed) return;
  std::string missed;
  for (const std::string& op : r.missed_gpu_paths) missed += (missed.empty() ? "" : ", ") + op;
  bool listed = host_steps.count(r.test) > 0;
  if (!missed.empty() && !listed) {
    r.outcome = Outcome::Failed;
    r.detail = "its module runs " + missed +
               " on the host for want of a kernel, though tcc ops gives it a GPU path; list the test in the "
               "host-steps file with why";
  } else if (missed.empty() && listed) {
    r.outcome = Outcome::Failed;
    r.detail = "the host-steps file lists it, but its module runs no op on the host for want of a kernel: remove "
               "the entry";
  }
}

// The test's model.onnx, or, when its default-domain opset is below
// kMinOpset (a model SupportCheck found unchanged at kMinOpset), a copy of it
// importing kMinOpset, removed with this.
class LiftedModel {
 public:
  LiftedModel(const fs::path& test_dir, const onnx::ModelProto& proto) : path_(test_dir / "model.onnx") {
    onnx::ModelProto lifted = proto;
    bool changed = false;
    for (auto& o : *lifted.mutable_opset_import())
      if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() < kMinOpset) {
        o.set_version(kMinOpset);
        changed = true;
      }
    if (!changed) return;
    dir_ = fs::temp_directory_path() / ("tcc_conformance_" + std::to_string(::getpid()) + "_" +
                                        test_dir.filename().string());
    fs::create_directories(dir_);
    path_ = dir_ / "model.onnx";
    std::ofstream out(path_, std::ios::binary);
    if (!lifted.SerializeToOstream(&out) || !out.flush()) throw InputError(path_.string() + ": cannot write");
  }
  ~LiftedModel() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_, dir_;
};

Result run_test(const fs::path& test_dir, const std::map<std::string, std::string>& exclusions,
                const std::map<std::string, std::string>& host_steps, const Options& opt) {
  Result r;
  r.test = test_dir.filename().string();
  std::optional<onnx::ModelProto> read = read_model_proto(test_dir / "model.onnx");
  if (!read) {
    r.op = "(unreadable)";
    r.outcome = Outcome::Skipped;
    r.detail = "model.onnx is not a readable ModelProto";
    return r;
  }
  const onnx::ModelProto& proto = *read;
  r.op = op_of_test(test_dir, proto);
  auto ex = exclusions.find(r.test);
  if (ex != exclusions.end()) {
    r.outcome = Outcome::Excluded;
    r.detail = ex->second;
    return r;
  }
  std::string why = SupportCheck(proto).why_unsupported(proto);
  if (!why.empty()) {
    r.outcome = Outcome::Skipped;
    r.detail = why;
    return r;
  }
  try {
    LiftedModel lifted(test_dir, proto);
    run_supported(test_dir, lifted.path(), opt.compiled, opt.on_gpu, r);
  } catch (const std::exception& e) {
    r.outcome = Outcome::Failed;
    r.detail = e.what();
  }
  if (!opt.compiled.empty()) check_host_steps(r, host_steps);
  return r;
}

// `test_name  reason` per line; '#' starts a comment. An entry without a
// reason is an error: every exclusion or listed host step must say why.
// `entry` names an entry in messages ("exclusion", "host step").
std::map<std::string, std::string> read_reasons(const std::string& path, const std::string& entry) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  std::ifstream f(path);
  if (!f) throw InputError(path + ": cannot open the " + entry + " file");
  std::string line;
  for (int lineno = 1; std::getline(f, line); ++lineno) {
    line = line.substr(0, line.find('#'));
    std::istringstream is(line);
    std::string name;
    if (!(is >> name)) continue;
    std::string reason;
    std::getline(is >> std::ws, reason);
    while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back()))) reason.pop_back();
    if (reason.empty())
      throw InputError(path + ":" + std::to_string(lineno) + ": " + entry + " of '" + name + "' gives no reason");
    if (!out.emplace(name, reason).second)
      throw InputError(path + ":" + std::to_string(lineno) + ": '" + name + "' is listed twice");
  }
  return out;
}

// Per op: the tests' outcomes, and with `compiled` how many of their modules
// run a step on the host.
void print_op_table(const std::vector<Result>& results, bool compiled) {
  struct Counts {
    int pass = 0, fail = 0, skip = 0, excluded = 0, host = 0;
  };
  std::map<std::string, Counts> by_op;
  for (const Result& r : results) {
    Counts& c = by_op[r.op];
    switch (r.outcome) {
      case Outcome::Passed: ++c.pass; break;
      case Outcome::Failed: ++c.fail; break;
      case Outcome::Skipped: ++c.skip; break;
      case Outcome::Excluded: ++c.excluded; break;
    }
    if (!r.host_ops.empty()) ++c.host;
  }
  std::printf("\nPer-op summary\n%-34s %6s %6s %6s %9s%s\n", "op", "pass", "fail", "skip", "excluded",
              compiled ? "   host" : "");
  for (const auto& [op, c] : by_op) {
    std::printf("%-34s %6d %6d %6d %9d", op.c_str(), c.pass, c.fail, c.skip, c.excluded);
    if (compiled) std::printf(" %6d", c.host);
    std::printf("\n");
  }
}

// A compile refusal without what names one model: the op of the node it
// names ("node 'Resize_0' (Resize): ..."), and the message's closing clause,
// which says what the compiler needs.
std::string refusal_kind(const std::string& detail) {
  std::string op;
  size_t node = detail.find("node '");
  size_t open = node == std::string::npos ? node : detail.find("' (", node);
  if (open != std::string::npos) op = detail.substr(open + 3, detail.find(')', open) - open - 3) + ": ";
  size_t last = detail.rfind("; ");
  return "tcc compile refused: " + op + (last == std::string::npos ? detail : detail.substr(last + 2));
}

void print_skip_reasons(const std::vector<Result>& results) {
  std::map<std::string, int> reasons;
  for (const Result& r : results)
    if (r.outcome == Outcome::Skipped) {
      // Group opsets by the bound they miss, not by each version.
      std::string key = r.detail.rfind("opset ", 0) == 0 ? "opset outside 13..23" : r.detail;
      if (key.rfind("tcc compile exit 2: ", 0) == 0) key = refusal_kind(key);
      ++reasons[key];
    }
  if (reasons.empty()) return;
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [k, n] : reasons) sorted.emplace_back(-n, k);
  std::sort(sorted.begin(), sorted.end());
  std::printf("\nSkipped, by reason\n");
  for (const auto& [n, k] : sorted) std::printf("%6d  %s\n", -n, k.c_str());
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--dir DIR] [--exclusions FILE] [--filter SUBSTRING] [--verbose] [--compiled TCC "
               "[--host-steps FILE] [--on-gpu]] [--shard I/N]\n",
               argv0);
  return 2;
}

int run(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (a == "--verbose" || a == "-v") {
      opt.verbose = true;
    } else if (a == "--dir" && (v = value())) {
      opt.dir = *v;
    } else if (a == "--exclusions" && (v = value())) {
      opt.exclusions = *v;
    } else if (a == "--host-steps" && (v = value())) {
      opt.host_steps = *v;
    } else if (a == "--filter" && (v = value())) {
      opt.filter = *v;
    } else if (a == "--compiled" && (v = value())) {
      opt.compiled = *v;
    } else if (a == "--on-gpu") {
      opt.on_gpu = true;
    } else if (a == "--shard" && (v = value())) {
      if (std::sscanf(v->c_str(), "%d/%d", &opt.shard, &opt.shards) != 2 || opt.shards < 1 || opt.shard < 0 ||
          opt.shard >= opt.shards)
        return usage(argv[0]);
    } else {
      return usage(argv[0]);
    }
  }
  if (opt.dir.empty() || !fs::is_directory(opt.dir)) {
    std::printf("SKIPPED: ONNX node tests not found%s%s (install the onnx Python package and reconfigure)\n",
                opt.dir.empty() ? "" : " at ", opt.dir.c_str());
    return kExitSkipped;
  }
  if (opt.on_gpu && opt.compiled.empty()) return usage(argv[0]);
  if (opt.on_gpu && !tcc_cuda_available()) {
    std::printf("SKIPPED: --on-gpu needs a CUDA device\n");
    return kExitSkipped;
  }
  std::map<std::string, std::string> exclusions = read_reasons(opt.exclusions, "exclusion");
  std::map<std::string, std::string> host_steps =
      opt.compiled.empty() ? std::map<std::string, std::string>{} : read_reasons(opt.host_steps, "host step");

  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(opt.dir)) {
    std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("test_", 0) == 0 && name.find(opt.filter) != std::string::npos)
      tests.push_back(e.path());
  }
  std::sort(tests.begin(), tests.end());
  std::set<std::string> present;
  for (const auto& t : tests) present.insert(t.filename().string());
  if (opt.shards > 1) {
    std::vector<fs::path> mine;
    for (size_t i = static_cast<size_t>(opt.shard); i < tests.size(); i += static_cast<size_t>(opt.shards))
      mine.push_back(tests[i]);
    tests = std::move(mine);
  }
  if (opt.filter.empty()) {
    for (const auto& [name, reason] : exclusions)
      if (!present.count(name)) std::printf("warning: excluded test '%s' does not exist\n", name.c_str());
    for (const auto& [name, reason] : host_steps)
      if (!present.count(name)) std::printf("warning: host-steps test '%s' does not exist\n", name.c_str());
  }

  std::printf("ONNX node conformance: %zu tests in %s%s\n", tests.size(), opt.dir.c_str(),
              opt.compiled.empty() ? " (reference interpreter)"
              : opt.on_gpu         ? " (modules compiled by tcc, run on the GPU)"
                                   : " (modules compiled by tcc, run on the host)");
  std::vector<Result> results;
  int passed = 0, failed = 0, skipped = 0, excluded = 0;
  for (const fs::path& t : tests) {
    Result r = run_test(t, exclusions, host_steps, opt);
    switch (r.outcome) {
      case Outcome::Passed:
        ++passed;
        if (opt.verbose) std::printf("PASS %s (%s)\n", r.test.c_str(), r.op.c_str());
        break;
      case Outcome::Failed:
        ++failed;
        std::printf("FAIL %s (%s): %s\n", r.test.c_str(), r.op.c_str(), r.detail.c_str());
        break;
      case Outcome::Skipped:
        ++skipped;
        if (opt.verbose) std::printf("SKIP %s (%s): %s\n", r.test.c_str(), r.op.c_str(), r.detail.c_str());
        break;
      case Outcome::Excluded:
        ++excluded;
        if (opt.verbose) std::printf("EXCLUDED %s (%s): %s\n", r.test.c_str(), r.op.c_str(), r.detail.c_str());
        break;
    }
    std::fflush(stdout);
    results.push_back(std::move(r));
  }
  print_op_table(results, !opt.compiled.empty());
  print_skip_reasons(results);
  std::printf("\npassed %d, failed %d, skipped %d, excluded %d (of %zu)\n", passed, failed, skipped, excluded,
              tests.size());
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tcc::conformance

int main(int argc, char** argv) {
  try {
    return tcc::conformance::run(argc, argv);
  } catch (const tcc::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
