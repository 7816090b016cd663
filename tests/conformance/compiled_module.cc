// Compiling a node test's model with the tcc binary and running its module.
#include "tests/conformance/compiled_module.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <sys/wait.h>
#include <unistd.h>

#include "src/ops/fusion.h"
#include "src/ops/op_registry.h"
#include "src/module/structured_values.h"
#include "src/runtime/module.h"
#include "tests/conformance/test_data.h"

namespace tcc::conformance {

namespace fs = std::filesystem;

namespace {

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Outputs whose size depends on the data, which the run asks memory for
// (tcc_module_set_output_allocator): a host tensor, and on the GPU device
// memory copied back after the run.
struct SizedOutputs {
  std::vector<Tensor>* outs = nullptr;
  bool on_gpu = false;
  std::vector<void*> device;
  ~SizedOutputs() {
    for (void* p : device) runtime::device::release(p);
  }
  static void* allocate(void* ctx, size_t output, const int64_t* shape, int32_t rank, size_t nbytes) {
    auto* s = static_cast<SizedOutputs*>(ctx);
    Tensor& t = (*s->outs)[output];
    t = Tensor(t.dtype(), std::vector<int64_t>(shape, shape + rank));
    if (!s->on_gpu) return t.raw_mut();
    s->device.resize(s->outs->size(), nullptr);
    return s->device[output] = runtime::device::alloc(nbytes);
  }
};

}  // namespace

CompiledModule::CompiledModule(const std::string& tcc, const fs::path& model, const std::string& hints,
                               const std::vector<std::string>& specialize, bool on_gpu) {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("tcc_conformance_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::string command = shell_quoted(tcc) + " compile " + shell_quoted(model.string()) + " -o " +
                        shell_quoted(dir_.string()) +
                        (hints.empty() ? "" : " --shape-hint " + shell_quoted(hints));
  for (const std::string& s : specialize) command += " --specialize " + shell_quoted(s);
  command += std::string(on_gpu ? " --arch native --no-ptx --no-host 2>&1" : " --arch sm_90 --no-ptx 2>&1");
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) throw std::runtime_error("cannot start " + command);
  std::string output;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  int status = ::pclose(p);
  if (status != 0) {
    std::string line = output.substr(0, output.find('\n'));
    size_t error = output.find("error: ");
    if (error != std::string::npos) line = output.substr(error, output.find('\n', error) - error);
    bool refused = WIFEXITED(status) && WEXITSTATUS(status) == 2;
    (refused ? refused_ : failed_) = "tcc compile " +
                                     (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                        : "killed by signal " + std::to_string(WTERMSIG(status))) +
                                     ": " + line;
    return;
  }
  if (tcc_module_load(dir_.c_str(), &module_) != TCC_OK) {
    failed_ = std::string("tcc_module_load: ") + tcc_last_error();
    return;
  }
  read_host_steps();
  read_structure();
}

CompiledModule::~CompiledModule() {
  tcc_module_free(module_);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::vector<Tensor> CompiledModule::run(const std::map<std::string, Tensor>& feeds,
                                        const std::vector<std::string>& outputs, bool on_gpu) {
  std::map<std::string, Tensor> flat;
  for (const auto& [name, t] : feeds) {
    auto s = std::find_if(structured_inputs_.begin(), structured_inputs_.end(),
                          [&](const StructuredValue& v) { return v.name == name; });
    if (s == structured_inputs_.end()) flat[name] = t;
    else flatten_structured(*s, t, flat);
  }
  std::vector<Tensor> outs = run_flat(flat, on_gpu);
  std::map<std::string, Tensor> by_name;
  for (size_t i = 0; i < outs.size(); ++i) by_name[tcc_module_output_name(module_, i)] = outs[i];
  std::vector<Tensor> result;
  for (const std::string& name : outputs) {
    auto s = std::find_if(structured_outputs_.begin(), structured_outputs_.end(),
                          [&](const StructuredValue& v) { return v.name == name; });
    if (s != structured_outputs_.end()) result.push_back(assemble_structured(*s, by_name));
    else if (by_name.count(name)) result.push_back(by_name.at(name));
    else throw std::runtime_error("the module has no output '" + name + "'");
  }
  return result;
}

std::vector<Tensor> CompiledModule::run_flat(std::map<std::string, Tensor>& feeds, bool on_gpu) {
  auto check = [](tcc_status s, const char* what) {
    if (s != TCC_OK) throw std::runtime_error(std::string(what) + ": " + tcc_last_error());
  };
  std::vector<tcc_tensor> ins;
  for (size_t i = 0; i < tcc_module_num_inputs(module_); ++i) {
    auto it = feeds.find(tcc_module_input_name(module_, i));
    if (it == feeds.end())
      throw std::runtime_error(std::string("no data for module input '") + tcc_module_input_name(module_, i) + "'");
    Tensor& t = it->second;
    ins.push_back({t.raw_mut(), static_cast<tcc_dtype>(t.dtype()), static_cast<int32_t>(t.rank()), t.shape().data()});
  }
  std::vector<Tensor> outs;
  std::vector<tcc_tensor> c_outs;
  std::vector<bool> sized;  // a dim of -1: the run allocates it
  for (size_t i = 0; i < tcc_module_num_outputs(module_); ++i) {
    tcc_dtype dtype;
    int32_t rank = 0;
    int64_t dims[16];
    check(tcc_module_tensor_info(module_, 1, i, &dtype, &rank, dims, 16), "tcc_module_tensor_info");
    check(tcc_module_output_shape(module_, ins.data(), ins.size(), i, dims, 16, &rank), "tcc_module_output_shape");
    sized.push_back(std::any_of(dims, dims + rank, [](int64_t d) { return d < 0; }));
    outs.emplace_back(static_cast<DType>(dtype), sized.back() ? std::vector<int64_t>(static_cast<size_t>(rank), 0)
                                                               : std::vector<int64_t>(dims, dims + rank));
  }
  for (size_t i = 0; i < outs.size(); ++i)
    c_outs.push_back({sized[i] ? nullptr : outs[i].raw_mut(), static_cast<tcc_dtype>(outs[i].dtype()),
                      static_cast<int32_t>(outs[i].rank()), outs[i].shape().data()});
  SizedOutputs allocation;
  allocation.outs = &outs;
  allocation.on_gpu = on_gpu;
  check(tcc_module_set_output_allocator(module_, &SizedOutputs::allocate, &allocation), "output allocator");
  if (!on_gpu) {
    check(tcc_module_run_host(module_, ins.data(), ins.size(), c_outs.data(), c_outs.size()), "tcc_module_run_host");
    return outs;
  }
  // Device copies of every tensor, freed on the way out whatever happens.
  struct DeviceCopies {
    std::vector<void*> ptrs;
    ~DeviceCopies() {
      for (void* p : ptrs) runtime::device::release(p);
    }
    tcc_tensor of(tcc_tensor t, size_t nbytes, bool upload) {
      ptrs.push_back(runtime::device::alloc(nbytes));
      if (upload && nbytes > 0) runtime::device::upload(ptrs.back(), t.data, nbytes);
      t.data = ptrs.back();
      return t;
    }
  } device;
  std::vector<tcc_tensor> d_ins, d_outs;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Tensor& t = feeds.at(tcc_module_input_name(module_, i));
    d_ins.push_back(device.of(ins[i], t.nbytes(), true));
  }
  for (size_t i = 0; i < outs.size(); ++i)
    d_outs.push_back(sized[i] ? c_outs[i] : device.of(c_outs[i], outs[i].nbytes(), false));
  check(tcc_module_run_cuda(module_, d_ins.data(), d_ins.size(), d_outs.data(), d_outs.size(), nullptr),
        "tcc_module_run_cuda");
  for (size_t i = 0; i < outs.size(); ++i) {
    const void* from = sized[i] ? allocation.device[i] : d_outs[i].data;
    if (outs[i].nbytes() > 0) runtime::device::download(outs[i].raw_mut(), from, outs[i].nbytes());
  }
  return outs;
}

void CompiledModule::read_structure() {
  std::ifstream manifest_file(dir_ / "manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  structured_inputs_ = read_structured_list(manifest, "structured_inputs");
  structured_outputs_ = read_structured_list(manifest, "structured_outputs");
}

void CompiledModule::read_host_steps() {
  std::ifstream report_file(dir_ / "report.json");
  nlohmann::json report = nlohmann::json::parse(report_file);
  for (const auto& f : report.value("fallbacks", nlohmann::json::array())) {
    std::string op = f.at("op_type").get<std::string>();
    host_ops_.insert(op);
    const OpRegistry& ops = OpRegistry::get();
    const OpDef* def = ops.lookup("", op, kMaxOpset);
    if (!def) def = ops.lookup(std::string(kTccDomain), op, kMaxOpset);
    if (f.at("reason") == "no_kernel" && def && std::string(gpu_path(*def)) != "host")
      missed_gpu_paths_.insert(op + " (gpu: " + gpu_path(*def) + ")");
  }
}

}  // namespace tcc::conformance
