// The runtime's in-memory form of a compiled module (docs/MODULE.md).
//
// load_module reads and checks the whole directory up front — manifest fields,
// file paths, weights, host kernel symbols, the fallback nodes — and resolves
// every name in the schedule to a value id, so that a run only evaluates size
// expressions and walks indices. Everything a hostile or truncated module can
// get wrong is a BadModule naming the file and the field.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/ir/graph.h"
#include "src/module/kernel_abi.h"
#include "src/module/manifest_format.h"
#include "src/module/manifest_records.h"
#include "src/module/shared_library.h"
#include "tcc_runtime.h"

namespace tcc::runtime {

// A module directory that is missing, truncated or inconsistent (TCC_ERROR_BAD_MODULE).
using tcc::BadModule;
// Arguments that do not fit the module (TCC_ERROR_INVALID_ARGUMENT).
class InvalidArgument : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// No CUDA driver or no device (TCC_ERROR_NO_DEVICE).
class NoDevice : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A failing CUDA, cuBLASLt or cuDNN call (TCC_ERROR_CUDA).
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Host memory aligned like the module's weights and arena offsets.
class AlignedBytes {
 public:
  static constexpr size_t kAlignment = 256;
  AlignedBytes() = default;
  explicit AlignedBytes(size_t n);
  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t size_ = 0;
};

// Every tensor a schedule step can name, and where it lives.
struct ValueInfo {
  // BindingConstant: written by a binding step, kept per binding of the symbols.
  enum class Where { Input, Output, Weight, Buffer, BindingConstant };
  Where where = Where::Input;
  int index = 0;  // into Module::inputs / outputs / weights / buffers / binding_constants
  TensorSig sig;
};

struct WeightInfo {
  int64_t offset = 0, nbytes = 0;  // in weights.bin
};

struct BufferInfo {
  SymExpr offset, nbytes;  // in the arena
};

// One check of the manifest's guard set. Shape guards compare two size
// expressions over the input dims; a `modulus` guard is `lhs % modulus == rhs`.
struct Guard {
  enum class Cmp { Eq, Ne, Le, Lt, Ge, Gt };
  enum class Kind { Dtype, Size, Shape, ValuesEqual };
  Kind kind = Kind::Shape;
  std::string text;       // as the manifest spells it, for messages
  std::string needed_by;  // Shape: the node whose fact it checks (a Slice's bound, a Reshape's divisor), if any
  // Shape: the input sizes it reads as the manifest spells them ("x.size()[0]"), or for a fact citing a node the
  // sN it reads with the sizes they stand for ("s1 = x.size()[1]"), each with the symbol bound to it, for messages.
  std::vector<std::pair<std::string, SymExpr>> sources;
  int input = -1;    // Dtype, Size, ValuesEqual
  int axis = -1;     // Size
  DType dtype = DType::Undefined;
  int64_t size = 0;
  std::vector<double> values;  // ValuesEqual: the input's elements, row-major (a scalar's one)
  SymExpr lhs, rhs;  // Shape
  Cmp cmp = Cmp::Eq;
  int64_t modulus = 0;
};

// A Gemm kernel's cuBLASLt call and a Conv kernel's cuDNN call, as codegen
// describes them (buffers by position, sizes as expressions), with the rank of
// the library algorithm that runs (KernelConfig::algo).
struct GemmInfo : GemmDesc {
  int algo = 0;
};

struct ConvInfo : ConvDesc {
  int algo = 0;
};

struct KernelInfo {
  std::string name;
  KernelKind kind = KernelKind::Pointwise;
  std::vector<KernelParam> buffers;  // parameters, reads then writes
  int num_reads = 0;                 // buffers[num_reads] is the first output (D of a Gemm)
  std::vector<SymExpr> sizes;
  KernelLaunch launch;  // generated kernels (not library calls)
  std::optional<GemmInfo> gemm;
  std::optional<ConvInfo> conv;
  // Run through cuBLASLt or cuDNN, with no function in the cubin: conv kernels,
  // and gemm kernels unless autotuning chose tcc's template (then `gemm` only describes it).
  bool library_call = false;
  HostKernelFn host = nullptr;

  // The helper kernel a Conv kernel with an epilogue launches after a
  // convolution cuDNN runs alone (conv_epilogue_kernel of its output's dtype),
  // or "" for a kernel with none.
  std::string conv_epilogue() const {
    return conv && conv->has_epilogue() ? conv_epilogue_kernel(buffers[static_cast<size_t>(num_reads)].dtype) : "";
  }
};

struct StepInfo {
  int kernel = -1;                // a kernel step, or
  const Node* fallback = nullptr; // a node of fallback.tir run by the reference interpreter
  std::string node;
  std::vector<int> reads, writes; // value ids
};

struct CudaBinaryFile {
  std::string arch;  // "sm_90", "compute_90"
  std::string path;
};

struct CudaState;  // device resources, created by the first CUDA run (cuda_run.cc)
struct CudaStateDeleter {
  void operator()(CudaState* s) const;
};
struct CudaGraphs;  // the CUDA graphs of enqueue_cuda_graphs, one per binding (cuda_graphs.cc)
struct CudaGraphsDeleter {
  void operator()(CudaGraphs* g) const;
};

// What enqueue_cuda_graphs did so far.
struct GraphStats {
  static constexpr size_t kMaxGraphs = 8;  // graphs kept, the least recently used evicted first
  uint64_t captures = 0, replays = 0, evictions = 0;
  uint64_t uncaptured_runs = 0;  // runs step by step, because of not_captured
  std::string not_captured;      // capture_blocker's reason, when the module cannot be captured
};

struct Module {
  std::string dir;
  bool tf32 = false;  // --precision tf32: f32 GEMMs and convolutions multiply on tensor cores as TF32
  std::vector<TensorSig> inputs, outputs;
  // symbol -> where a call reads it: dim `axis` of input `input`, `scale` times the symbol.
  struct SymbolSource {
    int input = 0, axis = 0;
    int64_t scale = 1;
  };
  std::map<std::string, SymbolSource> symbols;
  // Data-dependent sizes (NonZero's count): symbol -> (value id, axis) of the
  // value a fallback step writes, bound once that step has run.
  std::map<std::string, std::pair<int, int>> value_symbols;
  std::vector<Guard> guards;
  std::vector<TensorSig> weights;
  std::vector<WeightInfo> weight_ranges;
  AlignedBytes weight_data;  // weights.bin
  std::vector<TensorSig> buffers;
  std::vector<BufferInfo> buffer_ranges;
  SymExpr arena_bytes;
  std::vector<KernelInfo> kernels;
  std::vector<StepInfo> steps;
  // Values the input shapes alone determine (masks, positions), and the
  // fallback nodes that compute them: run once per binding, before the steps.
  std::vector<TensorSig> binding_constants;
  std::vector<StepInfo> binding_steps;
  std::vector<ValueInfo> values;
  std::unordered_map<std::string, int> value_ids;
  std::vector<int> output_values;  // value id of each output (it may be an input or a weight)
  std::unique_ptr<Model> fallback_model;
  std::unique_ptr<SharedLibrary> host_library;  // null when compiled with --no-host (GPU only)
  // Whether a call draws random values (manifest "random"): it draws at
  // random_offset, then advances it by one (docs/MODULE.md, "Random ops").
  // Kernels that read it (KernelLaunch::random_offset) read a copy in device
  // memory on the GPU, which kRandomOffsetAdvance advances after each call;
  // random_offset_on_device is false while that copy may differ (a new
  // context, a host run, the setter) and the next device call uploads it.
  bool random = false;
  uint64_t random_offset = 0;
  bool random_offset_on_device = false;
  std::vector<CudaBinaryFile> cuda_binaries;
  // Declared after `cuda`, so destroyed before it: the graphs go first.
  std::unique_ptr<CudaState, CudaStateDeleter> cuda;
  std::unique_ptr<CudaGraphs, CudaGraphsDeleter> cuda_graphs;
  // Called before (begin) and after each step a CUDA run enqueues, so a
  // profiler can attribute device activity to the step that caused it.
  std::function<void(const StepInfo& step, bool begin)> step_observer;
  // Called, where set, after each step of a host or CUDA run with what the
  // step wrote, read back to the host (a CUDA run waits for the step first):
  // `tcc run --check-steps` compares it with the reference, value by value.
  std::function<void(const StepInfo& step, const std::vector<std::pair<int, Tensor>>& written)> step_inspector;
  // Memory for an output whose size depends on the data (NonZero's count),
  // which the caller passes with no data: called once the run knows its shape,
  // with the output's index, shape and bytes; returns host memory for a host
  // run, device memory for a CUDA run, which the caller owns.
  std::function<void*(size_t output, const std::vector<int64_t>& shape, size_t nbytes)> output_allocator;
  // Kept for the C API's name accessors.
  std::vector<std::string> input_names, output_names;
};

std::unique_ptr<Module> load_module(const std::string& dir);

// Makes the module's next call its call `offset`: its random ops draw what
// that call draws (docs/MODULE.md, "Random ops"), on the host or the device.
void set_random_offset(Module& m, uint64_t offset);

// What one call's input shapes make of the module's symbolic sizes.
struct Binding {
  std::map<std::string, int64_t> symbols;
  std::vector<std::vector<int64_t>> shapes;  // per value id
  std::vector<int64_t> nbytes;               // per value id
  std::vector<int64_t> buffer_offsets;       // per planned buffer
  int64_t arena_bytes = 0;
  std::vector<int64_t> constant_offsets;     // per binding constant, in one block
  int64_t constant_bytes = 0;
  // False while a data-dependent size (Module::value_symbols) is unbound: what
  // depends on it has no shape yet (bytes and offset -1), and arena_bytes
  // covers only the buffers placed before it.
  bool complete = true;
};

// Reads an input's first `bytes` bytes, for guards on input values (null: skip those guards).
using ValueReader = std::vector<std::byte> (*)(const tcc_tensor& t, size_t bytes, void* ctx);

// Checks the inputs against the signature and guards and evaluates every size.
// InvalidArgument names the input and what was expected; BadModule when the
// module's own expressions do not evaluate or disagree with each other.
Binding bind(const Module& m, const tcc_tensor* inputs, size_t num_inputs, ValueReader read_values, void* ctx);

// Checks the guards on input values alone: what a binding kept for inputs of
// the same dtypes and dims (bind's other checks) has still to check per call.
void check_value_guards(const Module& m, const tcc_tensor* inputs, ValueReader read_values, void* ctx);

// Binds the data-dependent sizes that value `value` gives (the shape a
// fallback step produced for it) and evaluates what waited for them.
void bind_value_symbols(const Module& m, Binding& b, int value, const std::vector<int64_t>& shape);

// Checks the caller's output tensors against the bound output shapes; an
// output whose size depends on data (no shape yet) may come with no data, for
// the module's output_allocator to provide.
void check_outputs(const Module& m, const Binding& b, const tcc_tensor* outputs, size_t num_outputs);

// Memory of each output the caller left to the output allocator, once b gives
// its shape: `allocated[i]` is set for the outputs that now have one and had none.
void allocate_sized_outputs(const Module& m, const Binding& b, const tcc_tensor* outputs,
                            std::vector<void*>& allocated);

// Evaluates e under the binding's symbols; BadModule naming `what` if it does not evaluate.
int64_t evaluate(const SymExpr& e, const Binding& b, const std::string& what);
// The same for a field of a kernel's manifest entry ("sizes", "launch.grid"):
// the launch path's form, which builds the kernel's name into a message only on failure.
int64_t evaluate(const SymExpr& e, const Binding& b, const KernelInfo& k, const char* field);

// Checks that the values a kernel step binds hold the bytes its buffers need at these sizes.
void check_kernel_buffers(const Module& m, const StepInfo& step, const Binding& b);

// Host memory of one value during a fallback step.
struct HostSpan {
  std::byte* data = nullptr;
  int64_t nbytes = 0;
};

// Runs a fallback step's node with the reference interpreter, reading and
// writing the values through `host` (which maps a value id to host memory).
// A node that reads only shapes (Shape, Size) reads none of its inputs' bytes.
// A value whose size depends on data (no shape in b yet) goes to `sized` with
// the shape the node produced before `host` is asked for its memory: the
// caller binds its sizes (bind_value_symbols) and makes room for it.
using SizedValue = std::function<void(int id, const std::vector<int64_t>& shape)>;
void run_fallback(const Module& m, const StepInfo& step, const Binding& b, const std::function<HostSpan(int)>& host,
                  const SizedValue& sized = nullptr);

// The binding constants under b, computed on the host by running the binding
// steps: one block laid out as b.constant_offsets says.
AlignedBytes compute_binding_constants(const Module& m, const Binding& b);

void run_host(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs);
void run_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs,
              void* stream);
// run_cuda without waiting for the stream: the next run on the same stream may
// reuse the arena, since the stream orders them; the caller synchronizes.
void enqueue_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs,
                  void* stream);
bool cuda_available();

// One run recorded as a CUDA graph: each launch replays it on the memory the
// capture saw, so callers copy new inputs into the captured input buffers.
// A replay is a call of the module: it draws at the module's random offset,
// which the captured kRandomOffsetAdvance then advances on the device.
// The graph keeps the module's memory it reads alive, so runs at other shapes
// in between (which may grow the arena) do not pull it away.
class CudaGraph {
 public:
  ~CudaGraph();
  void launch(void* stream);

 private:
  friend std::unique_ptr<CudaGraph> capture_stream(void*, const std::function<void()>&);
  friend std::unique_ptr<CudaGraph> capture_cuda(Module&, const tcc_tensor*, size_t, tcc_tensor*, size_t, void*);
  void* exec_ = nullptr;  // CUgraphExec
  // The module whose random offset each replay advances (one that draws
  // random values), which must outlive the graph; else null.
  Module* random_ = nullptr;
  // Device memory the graph reads that the module may replace while the graph
  // lives (its arena as bindings grow, workspaces, binding constants).
  std::vector<std::shared_ptr<const void>> memory_;
};

// Why the module's runs cannot be captured as a CUDA graph, or "" when they can.
std::string capture_blocker(const Module& m);

// Runs once (to allocate what the run needs), then captures one run on
// `stream` (not the legacy default stream) and instantiates it.
// InvalidArgument carrying capture_blocker's reason when capture is impossible.
std::unique_ptr<CudaGraph> capture_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                                        size_t num_outputs, void* stream);
// reduce-overhead with a CUDA graph per binding of the symbols (torch's
// CUDA-graph trees): the first run at a binding captures one on static buffers
// of its own, later runs copy their inputs in, replay it and copy the outputs
// out, all enqueued on `stream` (a created stream); the caller synchronizes.
// A module capture_blocker refuses runs step by step (enqueue_cuda).
void enqueue_cuda_graphs(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                         size_t num_outputs, void* stream);
GraphStats graph_stats(const Module& m);

// Captures what `enqueue` puts on `stream` (not the legacy default stream),
// which must allocate nothing, and instantiates it. CudaError when the
// driver refuses the capture.
std::unique_ptr<CudaGraph> capture_stream(void* stream, const std::function<void()>& enqueue);

// Device memory, streams and event timing for tools that drive runs (tcc run,
// tcc bench), on the context run_cuda uses. NoDevice where there is no GPU.
namespace device {
std::string name();
std::pair<int, int> compute_capability();  // (major, minor) of the current device
void* alloc(size_t nbytes);
void release(void* p);
void upload(void* dst, const void* src, size_t nbytes);
void download(void* dst, const void* src, size_t nbytes);
void copy_async(void* dst, const void* src, size_t nbytes, void* stream);  // device to device
// Device-to-device copies dsts[i] <- srcs[i] of nbytes[i] bytes, each after
// the stream's earlier work, in one driver call where the driver has
// cuMemcpyBatchAsync (one call's host time instead of one per copy), else one
// by one. The copies must not overlap one another.
void copy_batch_async(const std::vector<void*>& dsts, const std::vector<const void*>& srcs,
                      const std::vector<size_t>& nbytes, void* stream);
void* create_stream();
void destroy_stream(void* stream);
void sync(void* stream);

// GPU time between two points of a stream (a pair of CUDA events).
class Timer {
 public:
  Timer();
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start(void* stream);
  void stop(void* stream);
  double elapsed_ms();  // waits for stop

 private:
  void* begin_ = nullptr;
  void* end_ = nullptr;
};
}  // namespace device

}  // namespace tcc::runtime
