// Conv kernels through cuDNN's graph API (see cudnn_conv.h).
#include "cudnn_conv.h"

#include <dlfcn.h>

#include <algorithm>

namespace tcc::runtime {

namespace {

// The handle and the graph API.
#define TCC_CUDNN_ENTRIES(X) \
  X(create, cudnnCreate, "cudnnCreate") \
  X(destroy, cudnnDestroy, "cudnnDestroy") \
  X(set_stream, cudnnSetStream, "cudnnSetStream") \
  X(error_string, cudnnGetErrorString, "cudnnGetErrorString") \
  X(desc_create, cudnnBackendCreateDescriptor, "cudnnBackendCreateDescriptor") \
  X(desc_destroy, cudnnBackendDestroyDescriptor, "cudnnBackendDestroyDescriptor") \
  X(desc_set, cudnnBackendSetAttribute, "cudnnBackendSetAttribute") \
  X(desc_get, cudnnBackendGetAttribute, "cudnnBackendGetAttribute") \
  X(desc_finalize, cudnnBackendFinalize, "cudnnBackendFinalize") \
  X(execute, cudnnBackendExecute, "cudnnBackendExecute")

struct Cudnn {
  TCC_CUDNN_ENTRIES(TCC_ENTRY_MEMBER)
  std::string unavailable;

  static const Cudnn& get() {
    static const Cudnn dnn = open();
    if (!dnn.unavailable.empty()) throw CudaError(dnn.unavailable);
    return dnn;
  }

  void check(cudnnStatus_t st, const std::string& what) const {
    if (st != CUDNN_STATUS_SUCCESS) throw CudaError(what + " failed: " + error_string(st));
  }

 private:
  static Cudnn open() {
    Cudnn c{};
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    bool ok = lib && TCC_RESOLVE_ENTRIES(TCC_CUDNN_ENTRIES, lib, c);
    if (!ok) c.unavailable = "cuDNN (libcudnn.so.9) cannot be loaded or lacks its graph API; Conv kernels need it";
    return c;
  }
};

// The variant pack's unique ids of the operands; virtual tensors take ids after them.
enum Uid : int64_t { kX = 1, kW, kY, kBias, kResidual, kFirstVirtual };

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

std::vector<int64_t> widen(const std::vector<int>& v) { return {v.begin(), v.end()}; }

// Whether an engine's numerical notes keep the precision the module was
// compiled for: f32 stays f32 (no TF32 tensor cores, no inputs converted down)
// unless --precision tf32 allows TF32, and no dtype sums in reduced precision.
bool keeps_precision(const std::vector<cudnnBackendNumericalNote_t>& notes, cudnnDataType_t dtype, bool tf32) {
  for (cudnnBackendNumericalNote_t n : notes) {
    if (n == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) return false;
    if (dtype == CUDNN_DATA_FLOAT && n == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
    if (dtype == CUDNN_DATA_FLOAT && !tf32 && n == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) return false;
  }
  return true;
}

}  // namespace

cudnnHandle_t cudnn_create() {
  const Cudnn& dnn = Cudnn::get();
  cudnnHandle_t h = nullptr;
  dnn.check(dnn.create(&h), "cudnnCreate");
  return h;
}

void cudnn_set_stream(cudnnHandle_t handle, CUstream stream) {
  const Cudnn& dnn = Cudnn::get();
  dnn.check(dnn.set_stream(handle, reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream");
}

void cudnn_destroy(cudnnHandle_t handle) { Cudnn::get().destroy(handle); }

CudnnConvPlan::CudnnConvPlan(cudnnHandle_t handle, const ConvProblem& problem, const ConvConfig& config,
                             int64_t workspace_bytes, const std::string& what)
    : problem_(problem), config_(config), what_(what) {
  fused_ = config.has_epilogue() && build_graph(handle, true, workspace_bytes);
  if (!fused_) {
    graph_.clear();
    if (!build_graph(handle, false, workspace_bytes))
      throw CudaError(what_ + ": cuDNN has no engine for this convolution within the workspace");
  }
}

cudnnBackendDescriptor_t BackendDescriptors::make(cudnnBackendDescriptorType_t type, const std::string& what) {
  const Cudnn& dnn = Cudnn::get();
  cudnnBackendDescriptor_t d = nullptr;
  dnn.check(dnn.desc_create(type, &d), what + ": cudnnBackendCreateDescriptor");
  all_.push_back(d);
  return d;
}

void BackendDescriptors::clear() {
  if (all_.empty()) return;
  const Cudnn& dnn = Cudnn::get();
  for (cudnnBackendDescriptor_t d : all_) dnn.desc_destroy(d);
  all_.clear();
}

// Builds the operation graph (with the epilogue when `fuse_epilogue`) and
// finalizes the execution plan of the rank asked for among the engine configs
// that keep the precision and fit the workspace; false when there is none. A
// fused graph takes only precompiled engines: one cuDNN compiles at run time
// would cost a cold start of up to seconds per convolution.
bool CudnnConvPlan::build_graph(cudnnHandle_t handle, bool fuse_epilogue, int64_t workspace_bytes) {
  const Cudnn& dnn = Cudnn::get();
  auto set = [&](cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                 int64_t count, const void* values) {
    dnn.check(dnn.desc_set(d, name, type, count, values),
              what_ + ": cudnnBackendSetAttribute " + std::to_string(static_cast<int>(name)));
  };
  auto finalize = [&](cudnnBackendDescriptor_t d, const char* which) {
    dnn.check(dnn.desc_finalize(d), what_ + ": cudnnBackendFinalize (" + which + ")");
  };
  const ConvProblem& p = problem_;
  const bool f64 = config_.dtype == CUDNN_DATA_DOUBLE;
  const cudnnDataType_t compute = f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  int64_t next_virtual = kFirstVirtual;
  auto tensor = [&](int64_t uid, const std::vector<int64_t>& dims, cudnnDataType_t type, int64_t alignment) {
    cudnnBackendDescriptor_t t = graph_.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what_);
    std::vector<int64_t> strides = packed_strides(dims);
    bool is_virtual = uid >= kFirstVirtual;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()), dims.data());
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()), strides.data());
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    finalize(t, "tensor");
    return t;
  };
  const std::vector<int64_t> ydims = widen(p.ydims);
  cudnnBackendDescriptor_t x = tensor(kX, widen(p.xdims), config_.dtype, config_.alignments[kX - 1]);
  cudnnBackendDescriptor_t w = tensor(kW, widen(p.wdims), config_.dtype, config_.alignments[kW - 1]);
  // Each stage of a fused epilogue writes a virtual tensor in the compute type; the last writes y.
  const int stages = fuse_epilogue ? int{config_.bias} + int{config_.residual} + int{config_.relu} : 0;
  int stage = 0;
  auto stage_output = [&]() {
    return stage++ == stages ? tensor(kY, ydims, config_.dtype, config_.alignments[kY - 1])
                             : tensor(next_virtual++, ydims, compute, 16);
  };

  cudnnBackendDescriptor_t conv = graph_.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, what_);
  const int64_t spatial = static_cast<int64_t>(p.pads.size());
  const std::vector<int64_t> pads = widen(p.pads), strides = widen(p.strides), dilations = widen(p.dilations);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;  // ONNX Conv does not flip the filter
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, spatial, pads.data());
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, spatial, pads.data());
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, spatial, strides.data());
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial, dilations.data());
  finalize(conv, "convolution");

  std::vector<cudnnBackendDescriptor_t> ops;
  double one64 = 1, zero64 = 0;
  float one32 = 1, zero32 = 0;
  const cudnnBackendAttributeType_t scalar = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* one = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* zero = f64 ? static_cast<const void*>(&zero64) : &zero32;
  cudnnBackendDescriptor_t out = stage_output();
  cudnnBackendDescriptor_t op = graph_.make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, what_);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, scalar, 1, one);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, scalar, 1, zero);
  finalize(op, "convolution operation");
  ops.push_back(op);
  uids_ = {kX, kW, kY};

  auto pointwise = [&](cudnnPointwiseMode_t pw_mode, cudnnBackendDescriptor_t operand) {
    cudnnBackendDescriptor_t pw = graph_.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what_);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pw_mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    finalize(pw, "pointwise");
    cudnnBackendDescriptor_t in = out;
    out = stage_output();
    cudnnBackendDescriptor_t pw_op = graph_.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what_);
    set(pw_op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    set(pw_op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in);
    if (operand) set(pw_op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &operand);
    set(pw_op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out);
    finalize(pw_op, "pointwise operation");
    ops.push_back(pw_op);
  };
  // In the order of the descriptor API's fused call, act(conv + residual + bias),
  // the form cuDNN's precompiled ConvBiasAct engines take.
  if (fuse_epilogue) {
    if (config_.residual) {
      pointwise(CUDNN_POINTWISE_ADD, tensor(kResidual, ydims, config_.dtype, config_.alignments[kResidual - 1]));
      uids_.push_back(kResidual);
    }
    if (config_.bias) {
      std::vector<int64_t> bdims(ydims.size(), 1);
      bdims[1] = ydims[1];
      pointwise(CUDNN_POINTWISE_ADD, tensor(kBias, bdims, config_.dtype, config_.alignments[kBias - 1]));
      uids_.push_back(kBias);
    }
    if (config_.relu) pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr);
  }

  cudnnBackendDescriptor_t graph = graph_.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what_);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
      ops.data());
  // The graph's and the plan's handles: recent cuDNN 9 releases deprecate
  // them (the handle comes with each execution), earlier ones need them, so
  // each is set where accepted and finalizing says whether anything is missing.
  dnn.desc_set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (dnn.desc_finalize(graph) != CUDNN_STATUS_SUCCESS) {
    if (fuse_epilogue) return false;
    finalize(graph, "operation graph");
  }

  cudnnBackendDescriptor_t heuristics = graph_.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what_);
  const cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
  set(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
  if (dnn.desc_finalize(heuristics) != CUDNN_STATUS_SUCCESS) {
    if (fuse_epilogue) return false;
    finalize(heuristics, "engine heuristics");
  }
  int64_t offered = 0;
  dnn.check(dnn.desc_get(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &offered,
                         nullptr),
            what_ + ": the number of engine configs");
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < offered; ++i) configs.push_back(graph_.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what_));
  dnn.check(dnn.desc_get(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, offered,
                         &offered, configs.data()),
            what_ + ": the engine configs");

  // The usable configs in rank order, up to the one asked for; each usable
  // one's plan replaces the last, so a rank past the end runs the last.
  int rank = -1;
  for (int64_t i = 0; i < offered && rank < config_.rank; ++i) {
    cudnnBackendDescriptor_t config = configs[static_cast<size_t>(i)];
    int64_t count = 0;
    cudnnBackendDescriptor_t engine = graph_.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, what_);
    dnn.check(dnn.desc_get(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine),
              what_ + ": an engine config's engine");
    std::vector<cudnnBackendNumericalNote_t> notes(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
    dnn.check(dnn.desc_get(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                           static_cast<int64_t>(notes.size()), &count, notes.data()),
              what_ + ": an engine's numerical notes");
    notes.resize(static_cast<size_t>(count));
    if (!keeps_precision(notes, config_.dtype, config_.tf32)) continue;
    if (fuse_epilogue) {
      std::vector<cudnnBackendBehaviorNote_t> behavior(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
      dnn.check(dnn.desc_get(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                             static_cast<int64_t>(behavior.size()), &count, behavior.data()),
                what_ + ": an engine's behavior notes");
      behavior.resize(static_cast<size_t>(count));
      if (std::count(behavior.begin(), behavior.end(), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) continue;
    }
    cudnnBackendDescriptor_t plan = graph_.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what_);
    dnn.desc_set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config);
    if (dnn.desc_finalize(plan) != CUDNN_STATUS_SUCCESS) continue;
    int64_t workspace = 0;
    dnn.check(dnn.desc_get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count, &workspace),
              what_ + ": an execution plan's workspace size");
    if (workspace > workspace_bytes) continue;
    plan_ = plan;
    ++rank;
  }
  rank_ = rank;
  return rank >= 0;
}

void CudnnConvPlan::run(cudnnHandle_t handle, const ConvOperands& ops) {
  const Cudnn& dnn = Cudnn::get();
  std::array<void*, 6> pointers{};
  for (size_t i = 0; i < uids_.size(); ++i)
    pointers[i] = uids_[i] == kX      ? ops.x
                  : uids_[i] == kW    ? ops.w
                  : uids_[i] == kY    ? ops.y
                  : uids_[i] == kBias ? ops.bias
                                      : ops.residual;
  pointers[uids_.size()] = ops.workspace;
  // The launch path names the kernel in a message only on failure.
  auto call = [&](cudnnStatus_t st, const char* api) {
    if (st != CUDNN_STATUS_SUCCESS) dnn.check(st, what_ + ": " + api);
  };
  if (!pack_ || pointers != pack_pointers_) {
    pack_owner_.clear();
    pack_pointers_ = {};
    pack_ = pack_owner_.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, what_);
    const int64_t n = static_cast<int64_t>(uids_.size());
    call(dnn.desc_set(pack_, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids_.data()),
         "cudnnBackendSetAttribute (variant pack ids)");
    call(dnn.desc_set(pack_, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, pointers.data()),
         "cudnnBackendSetAttribute (variant pack pointers)");
    call(dnn.desc_set(pack_, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &pointers[uids_.size()]),
         "cudnnBackendSetAttribute (variant pack workspace)");
    call(dnn.desc_finalize(pack_), "cudnnBackendFinalize (variant pack)");
    pack_pointers_ = pointers;
  }
  call(dnn.execute(handle, plan_, pack_), "cudnnBackendExecute");
}

}  // namespace tcc::runtime
