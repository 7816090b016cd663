// Running a module on a CUDA device.
//
// The driver (libcuda.so.1), cuBLASLt (libcublasLt.so.13) and cuDNN
// (libcudnn.so.9) are opened with dlopen on first use; cuda.h, cublasLt.h and
// cudnn.h are included for their types only, so a program linked with the
// runtime starts where there is no GPU.
//
// Per module, the first run in a context loads the cubin that fits the device
// (PTX when none does), uploads the weights and keeps them; the arena grows to
// the largest binding seen. Kernel steps launch with the manifest's launch
// configuration (split reductions with their own zeroed workspace, kept with
// the module like the arena); Gemm steps are one cuBLASLt matmul; Conv steps are cuDNN
// calls (one fused convolution + bias + residual + Relu where cuDNN has it); fallback steps copy
// their values to the host, run the reference interpreter and copy back.
// What depends only on the input shapes (the binding, every step's size
// arguments, grid and workspace, and the binding constants: masks and
// positions computed on the host and uploaded) is evaluated once per set of
// shapes and kept for the next runs at those shapes, so a steady run only
// resolves pointers and launches.
// A run returns after the stream has finished it, since its arena is reused
// by the next run; enqueue_cuda leaves that wait to tools that order their
// runs on one stream. capture_cuda records one run as a CUDA graph.
#include <dlfcn.h>

#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>

#include "cuda_driver.h"
#include "module.h"

namespace tcc::runtime {

namespace {

struct CublasLt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtMatmulDescCreate) desc_create;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic;
  std::string unavailable;

  static const CublasLt& get() {
    static const CublasLt lt = open();
    if (!lt.unavailable.empty()) throw CudaError(lt.unavailable);
    return lt;
  }

  static void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw CudaError(std::string(what) + " failed: cuBLAS status " + std::to_string(s));
  }

 private:
  static CublasLt open() {
    CublasLt lt{};
    void* lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    bool ok = lib && resolve(lib, "cublasLtCreate", lt.create) && resolve(lib, "cublasLtDestroy", lt.destroy) &&
              resolve(lib, "cublasLtMatmul", lt.matmul) &&
              resolve(lib, "cublasLtMatmulDescCreate", lt.desc_create) &&
              resolve(lib, "cublasLtMatmulDescDestroy", lt.desc_destroy) &&
              resolve(lib, "cublasLtMatmulDescSetAttribute", lt.desc_set) &&
              resolve(lib, "cublasLtMatrixLayoutCreate", lt.layout_create) &&
              resolve(lib, "cublasLtMatrixLayoutDestroy", lt.layout_destroy) &&
              resolve(lib, "cublasLtMatrixLayoutSetAttribute", lt.layout_set) &&
              resolve(lib, "cublasLtMatmulPreferenceCreate", lt.pref_create) &&
              resolve(lib, "cublasLtMatmulPreferenceDestroy", lt.pref_destroy) &&
              resolve(lib, "cublasLtMatmulPreferenceSetAttribute", lt.pref_set) &&
              resolve(lib, "cublasLtMatmulAlgoGetHeuristic", lt.heuristic);
    if (!ok) lt.unavailable = "cuBLASLt (libcublasLt.so.13) cannot be loaded; Gemm kernels need it";
    return lt;
  }
};

// cuDNN's convolution entry points. cuDNN 9 marks this descriptor API as
// legacy in favour of its graph API, but still ships it in libcudnn.so.9; it is
// the smallest correct way to run one convolution with its epilogue.
struct Cudnn {
  decltype(&::cudnnCreate) create;
  decltype(&::cudnnDestroy) destroy;
  decltype(&::cudnnSetStream) set_stream;
  decltype(&::cudnnGetErrorString) error_string;
  decltype(&::cudnnCreateTensorDescriptor) tensor_create;
  decltype(&::cudnnSetTensorNdDescriptor) tensor_set;
  decltype(&::cudnnDestroyTensorDescriptor) tensor_destroy;
  decltype(&::cudnnCreateFilterDescriptor) filter_create;
  decltype(&::cudnnSetFilterNdDescriptor) filter_set;
  decltype(&::cudnnDestroyFilterDescriptor) filter_destroy;
  decltype(&::cudnnCreateConvolutionDescriptor) conv_create;
  decltype(&::cudnnSetConvolutionNdDescriptor) conv_set;
  decltype(&::cudnnSetConvolutionGroupCount) conv_set_groups;
  decltype(&::cudnnSetConvolutionMathType) conv_set_math;
  decltype(&::cudnnDestroyConvolutionDescriptor) conv_destroy;
  decltype(&::cudnnCreateActivationDescriptor) act_create;
  decltype(&::cudnnSetActivationDescriptor) act_set;
  decltype(&::cudnnDestroyActivationDescriptor) act_destroy;
  decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) forward_algorithms;
  decltype(&::cudnnConvolutionForward) forward;
  decltype(&::cudnnConvolutionBiasActivationForward) forward_bias_activation;
  decltype(&::cudnnAddTensor) add_tensor;
  decltype(&::cudnnActivationForward) activation_forward;
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
    bool ok = lib && resolve(lib, "cudnnCreate", c.create) && resolve(lib, "cudnnDestroy", c.destroy) &&
              resolve(lib, "cudnnSetStream", c.set_stream) && resolve(lib, "cudnnGetErrorString", c.error_string) &&
              resolve(lib, "cudnnCreateTensorDescriptor", c.tensor_create) &&
              resolve(lib, "cudnnSetTensorNdDescriptor", c.tensor_set) &&
              resolve(lib, "cudnnDestroyTensorDescriptor", c.tensor_destroy) &&
              resolve(lib, "cudnnCreateFilterDescriptor", c.filter_create) &&
              resolve(lib, "cudnnSetFilterNdDescriptor", c.filter_set) &&
              resolve(lib, "cudnnDestroyFilterDescriptor", c.filter_destroy) &&
              resolve(lib, "cudnnCreateConvolutionDescriptor", c.conv_create) &&
              resolve(lib, "cudnnSetConvolutionNdDescriptor", c.conv_set) &&
              resolve(lib, "cudnnSetConvolutionGroupCount", c.conv_set_groups) &&
              resolve(lib, "cudnnSetConvolutionMathType", c.conv_set_math) &&
              resolve(lib, "cudnnDestroyConvolutionDescriptor", c.conv_destroy) &&
              resolve(lib, "cudnnCreateActivationDescriptor", c.act_create) &&
              resolve(lib, "cudnnSetActivationDescriptor", c.act_set) &&
              resolve(lib, "cudnnDestroyActivationDescriptor", c.act_destroy) &&
              resolve(lib, "cudnnGetConvolutionForwardAlgorithm_v7", c.forward_algorithms) &&
              resolve(lib, "cudnnConvolutionForward", c.forward) &&
              resolve(lib, "cudnnConvolutionBiasActivationForward", c.forward_bias_activation) &&
              resolve(lib, "cudnnAddTensor", c.add_tensor) && resolve(lib, "cudnnActivationForward", c.activation_forward);
    if (!ok) c.unavailable = "cuDNN (libcudnn.so.9) cannot be loaded or lacks its convolution API; Conv kernels need it";
    return c;
  }
};

// "sm_86" -> 86, "compute_90" -> 90; -1 for arch-specific targets (sm_90a) and anything else.
int arch_number(const std::string& arch) {
  size_t at = arch.find('_');
  std::string digits = arch.substr(at + 1);
  if (digits.empty() || digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

// A cubin runs on devices of its major version and at least its minor; PTX
// is compiled by the driver for any newer device. The newest that fits wins.
const CudaBinaryFile& pick_binary(const Module& m, int major, int minor) {
  int cc = major * 10 + minor;
  const CudaBinaryFile* best = nullptr;
  int best_number = -1;
  for (bool ptx : {false, true}) {
    for (const CudaBinaryFile& bin : m.cuda_binaries) {
      if ((bin.arch.rfind("compute_", 0) == 0) != ptx) continue;
      int n = arch_number(bin.arch);
      bool fits = ptx ? (n >= 0 && n <= cc) : (n >= 0 && n / 10 == major && n <= cc);
      if (fits && n > best_number) best = &bin, best_number = n;
    }
    if (best) return *best;
  }
  std::string have;
  for (const CudaBinaryFile& bin : m.cuda_binaries) have += (have.empty() ? "" : ", ") + bin.arch;
  throw CudaError("the module has no binary for sm_" + std::to_string(cc) + " (it has: " +
                  (have.empty() ? "none" : have) + ")");
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F64: return CUDA_R_64F;
    default: throw CudaError("cuBLASLt matmul of " + std::string(dtype_name(t)) + " is not supported");
  }
}

}  // namespace

// A Gemm kernel's problem at one binding.
struct GemmProblem {
  int64_t batch = 0, m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0, stride_a = 0, stride_b = 0, stride_d = 0;
};

GemmProblem gemm_problem(const KernelInfo& k, const Binding& b) {
  const GemmInfo& g = *k.gemm;
  auto ev = [&](const SymExpr& e) { return evaluate(e, b, k, "gemm"); };
  return {ev(g.batch), ev(g.m), ev(g.n), ev(g.k), ev(g.lda), ev(g.ldb), ev(g.ldd), ev(g.stride_a), ev(g.stride_b),
          ev(g.stride_d)};
}

// A Conv kernel's problem at one binding in cuDNN's int dims (a 1-D
// convolution as a 2-D one of height 1).
struct ConvProblem {
  std::vector<int> xdims, ydims, wdims, pads, strides, dilations;
  bool operator==(const ConvProblem&) const = default;
};

ConvProblem conv_problem(const KernelInfo& k, const Binding& b) {
  const ConvInfo& c = *k.conv;
  auto ev = [&](const SymExpr& e) {
    int64_t v = evaluate(e, b, k, "conv");
    if (v > INT32_MAX)
      throw CudaError("kernel '" + k.name + "' conv: extent " + std::to_string(v) + " exceeds cuDNN's int dims");
    return static_cast<int>(v);
  };
  ConvProblem p;
  p.xdims = {ev(c.n), ev(c.c)};
  p.ydims = {ev(c.n), ev(c.k)};
  p.wdims = {ev(c.k), ev(c.c) / static_cast<int>(c.groups)};
  for (size_t i = 0; i < c.kernel.size(); ++i) {
    p.xdims.push_back(ev(c.in[i]));
    p.ydims.push_back(ev(c.out[i]));
    p.wdims.push_back(static_cast<int>(c.kernel[i]));
    p.pads.push_back(static_cast<int>(c.pads[i]));
    p.strides.push_back(static_cast<int>(c.strides[i]));
    p.dilations.push_back(static_cast<int>(c.dilations[i]));
  }
  if (c.kernel.size() == 1) {
    for (std::vector<int>* v : {&p.xdims, &p.ydims, &p.wdims}) v->push_back(1);
    p.pads.push_back(0);
    p.strides.push_back(1);
    p.dilations.push_back(1);
  }
  return p;
}

// The runs at one set of input shapes share their binding and each kernel
// step's launch arguments.
// Device memory freed when its last owner lets go: the arena, a kernel's
// workspace and a binding's constants, which the module replaces as bindings
// grow or change while CUDA graphs captured on them still read them.
using DeviceMemory = std::shared_ptr<const void>;

DeviceMemory device_alloc(const Driver& d, size_t bytes, const char* what) {
  CUdeviceptr p = 0;
  d.check(d.mem_alloc(&p, bytes), what);
  return DeviceMemory(reinterpret_cast<const void*>(p),
                      [](const void* q) { Driver::get().mem_free(reinterpret_cast<CUdeviceptr>(q)); });
}

CUdeviceptr address(const DeviceMemory& m) { return reinterpret_cast<CUdeviceptr>(m.get()); }

struct BoundRun {
  std::vector<int64_t> dims;  // every input's dims in order: what a run is matched by
  bool reusable = false;      // false when guards read input values, which change between runs
  Binding binding;
  // The binding constants on the device (binding.constant_offsets); null when there are none.
  DeviceMemory constants;
  struct Launch {
    // A generated kernel's:
    std::vector<int64_t> sizes;
    unsigned grid[3] = {1, 1, 1};
    int64_t workspace_bytes = 0;  // 0: none
    // A library call's:
    GemmProblem gemm;
    ConvProblem conv;
  };
  std::vector<Launch> launches;  // per schedule step; unused for fallbacks
};

struct CudaState {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;  // per kernel; null for Gemm and Conv kernels
  CUdeviceptr weights = 0;
  DeviceMemory arena;
  size_t arena_bytes = 0;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  CUdeviceptr workspace = 0;  // shared by cuBLASLt and cuDNN, which run in stream order
  static constexpr size_t kWorkspaceBytes = 32 << 20;
  // Per kernel, the zeroed workspace of a split reduction (launch.workspace_bytes).
  struct KernelWorkspace {
    DeviceMemory ptr;
    size_t bytes = 0;  // allocated
    size_t used = 0;   // the layout of the last launch
  };
  std::vector<KernelWorkspace> kernel_workspaces;
  // Per Gemm kernel, its cuBLASLt descriptors and algorithm, kept while the
  // problem stays the same: the heuristic query costs more than a small
  // matmul's launch, and a step enqueues the same problems every time.
  static constexpr size_t kGemmKeySize = 21;
  struct GemmPlan {
    bool built = false;
    std::array<int64_t, kGemmKeySize> key{};  // sizes, strides, epilogue, rank asked for, dtypes, alignments
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
    cublasLtMatmulAlgo_t algo{};
    int rank = 0;
    void release(const CublasLt& lt) {
      for (cublasLtMatrixLayout_t l : {first, second, out})
        if (l) lt.layout_destroy(l);
      if (desc) lt.desc_destroy(desc);
      *this = {};
    }
  };
  std::map<const KernelInfo*, GemmPlan> gemm_plans;
  // Per Conv kernel, its cuDNN descriptors and algorithm, kept likewise.
  struct ConvPlan {
    bool built = false;
    ConvProblem problem;
    std::array<int, 4> config{};  // groups, activation, dtype, the rank asked for
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnActivationDescriptor_t act = nullptr;
    cudnnConvolutionFwdAlgo_t algo{};
    int rank = 0;
    void release(const Cudnn& dnn) {
      for (cudnnTensorDescriptor_t t : {x, y, bias})
        if (t) dnn.tensor_destroy(t);
      if (w) dnn.filter_destroy(w);
      if (conv) dnn.conv_destroy(conv);
      if (act) dnn.act_destroy(act);
      *this = {};
    }
  };
  std::map<const KernelInfo*, ConvPlan> conv_plans;
  // The bindings of the latest distinct input shapes, the most recent first.
  static constexpr size_t kBoundRuns = 8;
  std::vector<BoundRun> bound;
  // Per-run scratch, kept to spare the allocations.
  std::vector<int64_t> dims;
  std::vector<CUdeviceptr> ptr, buf;
  std::vector<void*> params;

  ~CudaState() {
    const Driver& d = Driver::get();
    if (d.ctx_push(ctx) != CUDA_SUCCESS) return;
    // What no CUDA graph still holds is freed here, in the module's context.
    bound.clear();
    arena.reset();
    kernel_workspaces.clear();
    for (CUdeviceptr p : {weights, workspace})
      if (p) d.mem_free(p);
    for (auto& [kernel, plan] : conv_plans) plan.release(Cudnn::get());
    if (dnn) Cudnn::get().destroy(dnn);
    for (auto& [kernel, plan] : gemm_plans) plan.release(CublasLt::get());
    if (lt) CublasLt::get().destroy(lt);
    if (module) d.module_unload(module);
    CUcontext popped;
    d.ctx_pop(&popped);
  }
};

void CudaStateDeleter::operator()(CudaState* s) const { delete s; }

namespace {

void ensure_workspace(CudaState& s, const Driver& d) {
  if (!s.workspace) d.check(d.mem_alloc(&s.workspace, CudaState::kWorkspaceBytes), "cuMemAlloc (library workspace)");
}

std::vector<char> read_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadModule(path + ": cannot read");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.push_back('\0');  // PTX is loaded as a NUL-terminated string; cubins ignore the extra byte
  return bytes;
}

CudaState& device_state(Module& m, const Driver& d, CUcontext ctx, CUstream stream) {
  if (m.cuda) {
    if (m.cuda->ctx != ctx) throw CudaError("the module was first run in another CUDA context");
    return *m.cuda;
  }
  auto s = std::unique_ptr<CudaState, CudaStateDeleter>(new CudaState);
  s->ctx = ctx;
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  int major = 0, minor = 0;
  d.check(d.device_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  d.check(d.device_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  bool any_generated = std::any_of(m.kernels.begin(), m.kernels.end(),
                                   [](const KernelInfo& k) { return !k.library_call; });
  if (any_generated) {
    std::vector<char> image = read_binary(pick_binary(m, major, minor).path);
    d.check(d.module_load(&s->module, image.data()), "cuModuleLoadData");
  }
  s->kernel_workspaces.resize(m.kernels.size());
  for (const KernelInfo& k : m.kernels) {
    CUfunction f = nullptr;
    if (!k.library_call) d.check(d.module_function(&f, s->module, k.name.c_str()), k.name.c_str());
    s->functions.push_back(f);
  }
  if (m.weight_data.size() > 0) {
    // A cuMemcpyHtoD from pageable memory may return before its DMA lands and
    // is not ordered with non-blocking streams: copy on the run's stream and wait.
    d.check(d.mem_alloc(&s->weights, m.weight_data.size()), "cuMemAlloc (weights)");
    d.check(d.copy_htod_async(s->weights, m.weight_data.data(), m.weight_data.size(), stream),
            "cuMemcpyHtoDAsync (weights)");
    d.check(d.stream_sync(stream), "cuStreamSynchronize");
  }
  m.cuda = std::move(s);
  return *m.cuda;
}

// `stream` is the run's: the caller may still be writing the input on it, and
// a copy on the legacy stream would not wait for a non-blocking stream's work.
double read_device_scalar(const tcc_tensor& t, void* stream) {
  DType dtype = static_cast<DType>(t.dtype);
  std::vector<std::byte> bytes(dtype_size(dtype));
  const Driver& d = Driver::get();
  d.check(d.copy_dtoh_async(bytes.data(), reinterpret_cast<CUdeviceptr>(t.data), bytes.size(),
                            static_cast<CUstream>(stream)),
          "cuMemcpyDtoHAsync (scalar input)");
  d.check(d.stream_sync(static_cast<CUstream>(stream)), "cuStreamSynchronize");
  return Tensor::from_bytes(dtype, {}, std::move(bytes)).get_f64(0);
}

// The largest power of two, up to 256 bytes, that a device address is a multiple of.
uint32_t pointer_alignment(CUdeviceptr p) {
  uint32_t align = 256;
  while (align > 1 && p % align != 0) align /= 2;
  return align;
}

// D = act(alpha * op(A) op(B) + beta * C + bias), row-major. cuBLASLt is
// column-major, and a row-major matrix is its column-major transpose, so the
// call computes D^T = op(B)^T op(A)^T: B is passed first. Returns the rank of
// the algorithm that ran.
int run_gemm(CudaState& s, const KernelInfo& k, const GemmProblem& p, const std::vector<CUdeviceptr>& buf,
             CUstream stream) {
  const GemmInfo& g = *k.gemm;
  const int64_t batch = p.batch, m = p.m, n = p.n, kk = p.k;
  if (batch <= 0 || m <= 0 || n <= 0) return g.algo;
  const CublasLt& lt = CublasLt::get();
  const Driver& d = Driver::get();
  if (!s.lt) CublasLt::check(lt.create(&s.lt), "cublasLtCreate");
  ensure_workspace(s, d);
  const int d_index = k.num_reads;
  DType in_type = k.buffers[g.a].dtype, out_type = k.buffers[d_index].dtype;
  bool f64 = in_type == DType::F64;
  CUdeviceptr c = g.residual >= 0 ? buf[g.residual] : buf[d_index];
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.activation == "relu") epilogue = g.bias >= 0 ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else if (g.activation == "gelu_tanh") epilogue = g.bias >= 0 ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  else if (g.bias >= 0) epilogue = CUBLASLT_EPILOGUE_BIAS;
  const int64_t lda = p.lda, ldb = p.ldb, ldd = p.ldd, stride_a = p.stride_a, stride_b = p.stride_b,
                stride_d = p.stride_d;
  // cuBLASLt's A is the row-major B, its B the row-major A.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, pointer_alignment(buf[g.b])},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, pointer_alignment(buf[g.a])},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, pointer_alignment(c)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, pointer_alignment(buf[d_index])}};
  int64_t bias_dtype = g.bias >= 0 ? static_cast<int64_t>(k.buffers[g.bias].dtype) : -1;
  const std::array<int64_t, CudaState::kGemmKeySize> key = {
      batch,    m,        n,        kk,       lda,       ldb,       ldd,
      stride_a, stride_b, stride_d, epilogue, g.algo,    g.trans_a, g.trans_b,
      static_cast<int64_t>(in_type), static_cast<int64_t>(out_type), bias_dtype,
      alignments[0].second, alignments[1].second, alignments[2].second, alignments[3].second};

  CudaState::GemmPlan& plan = s.gemm_plans[&k];
  if (!plan.built || plan.key != key) {
    plan.release(lt);
    cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale_type = f64 ? CUDA_R_64F : CUDA_R_32F;
    CublasLt::check(lt.desc_create(&plan.desc, compute, scale_type), "cublasLtMatmulDescCreate");
    cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CublasLt::check(lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)), "TRANSA");
    CublasLt::check(lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)), "TRANSB");
    CublasLt::check(lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "EPILOGUE");
    if (g.bias >= 0) {
      int32_t bias_type = cuda_type(k.buffers[g.bias].dtype);
      CublasLt::check(lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
                      "BIAS_DATA_TYPE");
    }
    auto layout = [&](cublasLtMatrixLayout_t& l, DType t, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
      CublasLt::check(lt.layout_create(&l, cuda_type(t), rows, cols, ld), "cublasLtMatrixLayoutCreate");
      int32_t count = static_cast<int32_t>(batch);
      CublasLt::check(lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), "BATCH_COUNT");
      CublasLt::check(lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
                      "STRIDED_BATCH_OFFSET");
    };
    // Row-major B is [k, n] (or [n, k] transposed): column-major n x k (k x n).
    layout(plan.first, k.buffers[g.b].dtype, g.trans_b ? kk : n, g.trans_b ? n : kk, ldb, stride_b);
    layout(plan.second, in_type, g.trans_a ? m : kk, g.trans_a ? kk : m, lda, stride_a);
    layout(plan.out, out_type, n, m, ldd, stride_d);

    // cuBLASLt ranks the algorithms that fit the workspace and the operands'
    // alignment; the kernel's config names one by rank (0: the first choice). A
    // rank past the list's end (sizes other than the ones tuned at) runs the last.
    cublasLtMatmulPreference_t pref = nullptr;
    CublasLt::check(lt.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
        pref_owner(pref, lt.pref_destroy);
    uint64_t workspace_bytes = CudaState::kWorkspaceBytes;
    CublasLt::check(
        lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes),
        "MAX_WORKSPACE_BYTES");
    for (const auto& [attr, align] : alignments)
      CublasLt::check(lt.pref_set(pref, attr, &align, sizeof align), "MIN_ALIGNMENT");
    cublasLtMatmulHeuristicResult_t ranked[kLibraryAlgos] = {};
    int offered = 0;
    CublasLt::check(lt.heuristic(s.lt, plan.desc, plan.first, plan.second, plan.out, plan.out, pref,
                                 std::min(g.algo + 1, kLibraryAlgos), ranked, &offered),
                    ("cublasLtMatmulAlgoGetHeuristic (kernel '" + k.name + "')").c_str());
    if (offered == 0) throw CudaError("kernel '" + k.name + "': cuBLASLt offers no algorithm for this problem");
    plan.rank = std::min(g.algo, offered - 1);
    plan.algo = ranked[plan.rank].algo;
    plan.key = key;
    plan.built = true;
  }
  if (g.bias >= 0) {
    void* bias = reinterpret_cast<void*>(buf[g.bias]);
    CublasLt::check(lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "BIAS_POINTER");
  }

  double alpha64 = g.alpha, beta64 = g.residual >= 0 ? g.beta : 0.0;
  float alpha32 = static_cast<float>(alpha64), beta32 = static_cast<float>(beta64);
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  cublasStatus_t status =
      lt.matmul(s.lt, plan.desc, alpha, reinterpret_cast<void*>(buf[g.b]), plan.first,
                reinterpret_cast<void*>(buf[g.a]), plan.second, beta, reinterpret_cast<void*>(c), plan.out,
                reinterpret_cast<void*>(buf[d_index]), plan.out, &plan.algo, reinterpret_cast<void*>(s.workspace),
                CudaState::kWorkspaceBytes, reinterpret_cast<cudaStream_t>(stream));
  if (status != CUBLAS_STATUS_SUCCESS) CublasLt::check(status, ("cublasLtMatmul (kernel '" + k.name + "')").c_str());
  return plan.rank;
}

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F64: return CUDNN_DATA_DOUBLE;
    default: throw CudaError("cuDNN convolution of " + std::string(dtype_name(t)) + " is not supported");
  }
}

// y = act(conv(x, w) + bias + residual), NCHW. cuDNN tensors have at least
// four dims, so a 1-D convolution runs as 2-D with a trailing spatial dim of 1.
// With Relu and a bias, one fused cudnnConvolutionBiasActivationForward (z is
// the residual, or y itself with alpha2 = 0); otherwise the convolution, then
// cudnnAddTensor for the bias and the residual and cudnnActivationForward in place.
int run_conv(CudaState& s, const KernelInfo& k, const ConvProblem& p, const std::vector<CUdeviceptr>& buf,
             CUstream stream) {
  const ConvInfo& c = *k.conv;
  if (std::find(p.ydims.begin(), p.ydims.end(), 0) != p.ydims.end()) return c.algo;

  const Cudnn& dnn = Cudnn::get();
  const Driver& d = Driver::get();
  if (!s.dnn) dnn.check(dnn.create(&s.dnn), "cudnnCreate");
  ensure_workspace(s, d);
  dnn.check(dnn.set_stream(s.dnn, reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream");
  DType dtype = k.buffers[k.num_reads].dtype;
  bool f64 = dtype == DType::F64;

  const std::array<int, 4> config = {static_cast<int>(c.groups), c.activation == "relu", static_cast<int>(dtype),
                                     c.algo};
  CudaState::ConvPlan& plan = s.conv_plans[&k];
  if (!plan.built || plan.config != config || !(plan.problem == p)) {
    plan.release(dnn);
    const std::string what = "kernel '" + k.name + "' conv";
    cudnnDataType_t type = cudnn_type(dtype);
    auto tensor = [&](cudnnTensorDescriptor_t& t, const std::vector<int>& dims) {
      std::vector<int> strides_of(dims.size(), 1);
      for (size_t i = dims.size() - 1; i-- > 0;) strides_of[i] = strides_of[i + 1] * dims[i + 1];
      dnn.check(dnn.tensor_create(&t), what + ": cudnnCreateTensorDescriptor");
      dnn.check(dnn.tensor_set(t, type, static_cast<int>(dims.size()), dims.data(), strides_of.data()),
                what + ": cudnnSetTensorNdDescriptor");
    };
    tensor(plan.x, p.xdims);
    tensor(plan.y, p.ydims);
    std::vector<int> bdims(p.ydims.size(), 1);
    bdims[1] = p.ydims[1];
    tensor(plan.bias, bdims);
    dnn.check(dnn.filter_create(&plan.w), what + ": cudnnCreateFilterDescriptor");
    dnn.check(dnn.filter_set(plan.w, type, CUDNN_TENSOR_NCHW, static_cast<int>(p.wdims.size()), p.wdims.data()),
              what + ": cudnnSetFilterNdDescriptor");
    dnn.check(dnn.conv_create(&plan.conv), what + ": cudnnCreateConvolutionDescriptor");
    // ONNX Conv is a cross-correlation (the filter is not flipped).
    dnn.check(dnn.conv_set(plan.conv, static_cast<int>(p.pads.size()), p.pads.data(), p.strides.data(),
                           p.dilations.data(), CUDNN_CROSS_CORRELATION, f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
              what + ": cudnnSetConvolutionNdDescriptor");
    dnn.check(dnn.conv_set_groups(plan.conv, static_cast<int>(c.groups)), what + ": cudnnSetConvolutionGroupCount");
    // CUDNN_DEFAULT_MATH lets f32 convolutions run as TF32 on Ampere and later;
    // FMA keeps them f32, as the host run and cuBLASLt's CUBLAS_COMPUTE_32F are.
    cudnnMathType_t math = dtype == DType::F32 ? CUDNN_FMA_MATH : f64 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
    dnn.check(dnn.conv_set_math(plan.conv, math), what + ": cudnnSetConvolutionMathType");
    if (c.activation == "relu") {
      dnn.check(dnn.act_create(&plan.act), what + ": cudnnCreateActivationDescriptor");
      // For Relu, cuDNN documents coef as an upper bound on the output: the largest double leaves it unbounded.
      dnn.check(
          dnn.act_set(plan.act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, std::numeric_limits<double>::max()),
          what + ": cudnnSetActivationDescriptor");
    }
    // cuDNN's heuristics rank the algorithms; of those that fit the workspace,
    // the kernel's config names one by rank (0: the first; past the end: the last).
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    dnn.check(dnn.forward_algorithms(s.dnn, plan.x, plan.w, plan.conv, plan.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                     &returned, perf),
              what + ": cudnnGetConvolutionForwardAlgorithm_v7");
    int rank = -1;
    for (int i = 0; i < returned && rank < c.algo; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= CudaState::kWorkspaceBytes) {
        plan.algo = perf[i].algo;
        ++rank;
      }
    if (rank < 0) throw CudaError(what + ": cuDNN has no forward algorithm within the workspace");
    plan.rank = rank;
    plan.problem = p;
    plan.config = config;
    plan.built = true;
  }

  double one64 = 1, zero64 = 0;
  float one32 = 1, zero32 = 0;
  const void* one = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* zero = f64 ? static_cast<const void*>(&zero64) : &zero32;
  auto ptr = [&](int index) { return reinterpret_cast<void*>(buf[static_cast<size_t>(index)]); };
  void* x = ptr(c.x);
  void* w = ptr(c.w);
  void* y = ptr(k.num_reads);
  void* ws = reinterpret_cast<void*>(s.workspace);
  // The launch path names the kernel in a message only on failure.
  auto call = [&](cudnnStatus_t st, const char* api) {
    if (st != CUDNN_STATUS_SUCCESS) dnn.check(st, "kernel '" + k.name + "' conv: " + api);
  };
  if (c.activation == "relu" && c.bias >= 0) {
    void* z = c.residual >= 0 ? ptr(c.residual) : y;
    call(dnn.forward_bias_activation(s.dnn, one, plan.x, x, plan.w, w, plan.conv, plan.algo, ws,
                                     CudaState::kWorkspaceBytes, c.residual >= 0 ? one : zero, plan.y, z, plan.bias,
                                     ptr(c.bias), plan.act, plan.y, y),
         "cudnnConvolutionBiasActivationForward");
    return plan.rank;
  }
  call(dnn.forward(s.dnn, one, plan.x, x, plan.w, w, plan.conv, plan.algo, ws, CudaState::kWorkspaceBytes, zero,
                   plan.y, y),
       "cudnnConvolutionForward");
  if (c.bias >= 0) call(dnn.add_tensor(s.dnn, one, plan.bias, ptr(c.bias), one, plan.y, y), "cudnnAddTensor (bias)");
  if (c.residual >= 0)
    call(dnn.add_tensor(s.dnn, one, plan.y, ptr(c.residual), one, plan.y, y), "cudnnAddTensor (residual)");
  if (c.activation == "relu")
    call(dnn.activation_forward(s.dnn, plan.act, one, plan.y, y, zero, plan.y, y), "cudnnActivationForward");
  return plan.rank;
}

// A split reduction's workspace (docs/MODULE.md), grown to this binding's size.
// Its arrival counters must start at zero, and the kernel leaves them at zero,
// so the memory is cleared only when its layout changes: where the counters lie
// depends on the row count, and a binding with fewer rows would find them in
// the partials of a larger one. The clearing goes on the launch's stream, which
// orders it before the kernel whatever kind of stream it is.
CUdeviceptr kernel_workspace(CudaState& s, const Driver& d, int kernel, int64_t want, CUstream stream) {
  CudaState::KernelWorkspace& w = s.kernel_workspaces[kernel];
  if (w.bytes < static_cast<size_t>(want)) {
    if (w.ptr) {
      d.check(d.stream_sync(stream), "cuStreamSynchronize");
      w = {};
    }
    w.ptr = device_alloc(d, static_cast<size_t>(want), "cuMemAlloc (kernel workspace)");
    w.bytes = static_cast<size_t>(want);
  }
  if (w.used != static_cast<size_t>(want)) {
    d.check(d.memset_d8_async(address(w.ptr), 0, static_cast<size_t>(want), stream),
            "cuMemsetD8Async (kernel workspace)");
    w.used = static_cast<size_t>(want);
  }
  return address(w.ptr);
}

// A kernel step's launch arguments at binding `b`; BadModule or CudaError
// naming the kernel when the manifest's expressions do not fit the device.
BoundRun::Launch launch_arguments(const KernelInfo& k, const Binding& b) {
  BoundRun::Launch l;
  for (const SymExpr& e : k.sizes) l.sizes.push_back(evaluate(e, b, k, "sizes"));
  static constexpr int64_t kGridLimit[3] = {INT32_MAX, 65535, 65535};
  for (int i = 0; i < 3; ++i) {
    int64_t g = std::max<int64_t>(1, evaluate(k.grid[i], b, k, "launch.grid"));
    if (g > kGridLimit[i])
      throw CudaError("kernel '" + k.name + "': grid extent " + std::to_string(g) + " exceeds the device limit");
    l.grid[i] = static_cast<unsigned>(g);
  }
  if (k.workspace_bytes != SymExpr()) {
    l.workspace_bytes = evaluate(k.workspace_bytes, b, k, "launch.workspace_bytes");
    if (l.workspace_bytes <= 0)
      throw BadModule("manifest.json: kernel '" + k.name + "' launch.workspace_bytes: evaluates to " +
                      std::to_string(l.workspace_bytes) + " bytes");
  }
  return l;
}

// The binding for these inputs, and each kernel step's launch arguments under
// it: found among the latest runs' when the input dims match one (the checks
// bind makes held for it then, unless guards read input values), else
// evaluated now and kept, moved to the front.
// Computes the binding constants on the host and copies them to new device
// memory, freed when the binding and every graph captured at it are gone.
DeviceMemory upload_binding_constants(const Module& m, const Binding& b, CUstream stream) {
  if (m.binding_steps.empty() || b.constant_bytes == 0) return nullptr;
  const Driver& d = driver();
  AlignedBytes host = compute_binding_constants(m, b);
  DeviceMemory block = device_alloc(d, host.size(), "cuMemAlloc (binding constants)");
  // From pageable memory: on the run's stream, waited for before `host` goes.
  d.check(d.copy_htod_async(address(block), host.data(), host.size(), stream),
          "cuMemcpyHtoDAsync (binding constants)");
  d.check(d.stream_sync(stream), "cuStreamSynchronize");
  return block;
}

// A kernel step's launch at binding b (a library call's problem for Gemm and Conv kernels).
BoundRun::Launch step_launch(const Module& m, const StepInfo& step, const Binding& b) {
  check_kernel_buffers(m, step, b);
  const KernelInfo& k = m.kernels[step.kernel];
  BoundRun::Launch l;
  if (!k.library_call) l = launch_arguments(k, b);
  else if (k.kind == KernelKind::Gemm) l.gemm = gemm_problem(k, b);
  else l.conv = conv_problem(k, b);
  return l;
}

// The binding and launches for these inputs: kept for the latest input shapes
// unless guards read input values or sizes depend on data (whose launches are
// made as the run binds them).
const BoundRun& bound_run(CudaState& s, const Module& m, const tcc_tensor* inputs, size_t num_inputs, CUstream stream) {
  bool reusable = num_inputs == m.inputs.size() && (num_inputs == 0 || inputs) && m.value_symbols.empty() &&
                  std::none_of(m.guards.begin(), m.guards.end(),
                               [](const Guard& g) { return g.kind == Guard::Kind::ScalarEquals; });
  s.dims.clear();
  for (size_t i = 0; reusable && i < num_inputs; ++i) {
    const tcc_tensor& t = inputs[i];
    const TensorSig& sig = m.inputs[i];
    reusable = static_cast<DType>(t.dtype) == sig.dtype && t.rank >= 0 &&
               static_cast<size_t>(t.rank) == sig.shape.size() && (t.rank == 0 || t.shape);
    if (reusable) s.dims.insert(s.dims.end(), t.shape, t.shape + t.rank);
  }
  if (reusable) {
    auto hit = std::find_if(s.bound.begin(), s.bound.end(),
                            [&](const BoundRun& r) { return r.reusable && r.dims == s.dims; });
    if (hit != s.bound.end()) {
      std::rotate(s.bound.begin(), hit, hit + 1);
      return s.bound.front();
    }
  }
  BoundRun r;
  r.binding = bind(m, inputs, num_inputs, read_device_scalar, stream);
  r.launches.resize(m.steps.size());
  for (size_t i = 0; i < m.steps.size() && r.binding.complete; ++i)
    if (!m.steps[i].fallback) r.launches[i] = step_launch(m, m.steps[i], r.binding);
  r.dims = s.dims;
  r.reusable = reusable;
  r.constants = upload_binding_constants(m, r.binding, stream);
  if (s.bound.size() == CudaState::kBoundRuns) {
    // Work already on the stream may still read the constants it lets go.
    if (s.bound.back().constants) driver().check(driver().stream_sync(stream), "cuStreamSynchronize");
    s.bound.pop_back();
  }
  s.bound.insert(s.bound.begin(), std::move(r));
  return s.bound.front();
}

}  // namespace

bool cuda_available() { return Driver::get().unavailable.empty(); }

void enqueue_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs,
                  void* stream_handle) {
  const Driver& d = driver();
  auto stream = static_cast<CUstream>(stream_handle);
  CudaState& s = device_state(m, d, current_context(d), stream);

  const BoundRun& run = bound_run(s, m, inputs, num_inputs, stream);
  // Sizes that depend on data are bound as the fallbacks producing them run:
  // into this run's own copy of the binding.
  std::optional<Binding> growing;
  if (!run.binding.complete) growing = run.binding;
  const Binding& b = growing ? *growing : run.binding;
  check_outputs(m, b, outputs, num_outputs);
  // The arena grows to `bytes`, keeping the first `keep` bytes that steps wrote.
  auto grow_arena = [&](size_t bytes, size_t keep) {
    if (s.arena_bytes >= bytes) return;
    DeviceMemory grown = device_alloc(d, bytes, "cuMemAlloc (arena)");
    if (keep > 0)
      d.check(d.copy_dtod_async(address(grown), address(s.arena), keep, stream), "cuMemcpyDtoDAsync (arena)");
    if (s.arena) d.check(d.stream_sync(stream), "cuStreamSynchronize");
    s.arena = std::move(grown);
    s.arena_bytes = bytes;
  };
  grow_arena(static_cast<size_t>(b.arena_bytes), 0);

  std::vector<CUdeviceptr>& ptr = s.ptr;
  ptr.resize(m.values.size());
  std::vector<void*> allocated(m.outputs.size(), nullptr);  // outputs the output allocator provided
  auto place = [&] {
    for (size_t v = 0; v < m.values.size(); ++v) {
      const ValueInfo& info = m.values[v];
      switch (info.where) {
        case ValueInfo::Where::Input: ptr[v] = reinterpret_cast<CUdeviceptr>(inputs[info.index].data); break;
        case ValueInfo::Where::Output: {
          void* data = outputs[info.index].data;
          ptr[v] = reinterpret_cast<CUdeviceptr>(data ? data : allocated[info.index]);
          break;
        }
        case ValueInfo::Where::Weight: ptr[v] = s.weights + m.weight_ranges[info.index].offset; break;
        case ValueInfo::Where::Buffer: {
          int64_t offset = b.buffer_offsets[info.index];
          ptr[v] = offset < 0 ? 0 : address(s.arena) + offset;
          break;
        }
        case ValueInfo::Where::BindingConstant:
          ptr[v] = address(run.constants) + b.constant_offsets[info.index];
          break;
      }
    }
  };
  place();
  // A data-dependent size, once a fallback produced it (the stream is idle then).
  auto sized = [&](int id, const std::vector<int64_t>& shape) {
    size_t used = static_cast<size_t>(growing->arena_bytes);
    bind_value_symbols(m, *growing, id, shape);
    grow_arena(static_cast<size_t>(growing->arena_bytes), used);
    allocate_sized_outputs(m, *growing, outputs, allocated);
    place();
  };

  // What a step wrote, copied back once the stream has run it.
  auto inspect = [&](const StepInfo& step) {
    if (!m.step_inspector) return;
    std::vector<std::vector<std::byte>> bytes;
    for (int id : step.writes) {
      bytes.emplace_back(static_cast<size_t>(b.nbytes[id]));
      if (!bytes.back().empty())
        d.check(d.copy_dtoh_async(bytes.back().data(), ptr[id], bytes.back().size(), stream),
                "cuMemcpyDtoHAsync (step values)");
    }
    d.check(d.stream_sync(stream), "cuStreamSynchronize");
    std::vector<std::pair<int, Tensor>> written;
    for (size_t w = 0; w < step.writes.size(); ++w) {
      int id = step.writes[w];
      written.emplace_back(id, Tensor::from_bytes(m.values[id].sig.dtype, b.shapes[id], std::move(bytes[w])));
    }
    m.step_inspector(step, written);
  };
  std::vector<CUdeviceptr>& buf = s.buf;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const StepInfo& step = m.steps[i];
    if (m.step_observer) m.step_observer(step, true);
    if (step.fallback) {
      std::map<int, std::vector<std::byte>> staged;
      for (int id : step.reads) {
        std::vector<std::byte>& host = staged[id];
        host.resize(b.nbytes[id]);
        if (!host.empty()) d.check(d.copy_dtoh_async(host.data(), ptr[id], host.size(), stream), "cuMemcpyDtoHAsync");
      }
      for (int id : step.writes) staged[id].resize(std::max<int64_t>(b.nbytes[id], 0));
      d.check(d.stream_sync(stream), "cuStreamSynchronize");
      run_fallback(
          m, step, b,
          [&](int id) {
            staged[id].resize(b.nbytes[id]);
            return HostSpan{staged[id].data(), b.nbytes[id]};
          },
          growing ? SizedValue(sized) : nullptr);
      for (int id : step.writes)
        if (b.nbytes[id] > 0)
          d.check(d.copy_htod_async(ptr[id], staged[id].data(), b.nbytes[id], stream), "cuMemcpyHtoDAsync");
      d.check(d.stream_sync(stream), "cuStreamSynchronize");
      if (m.step_observer) m.step_observer(step, false);
      inspect(step);
      continue;
    }
    buf.clear();
    for (int id : step.reads) buf.push_back(ptr[id]);
    for (int id : step.writes) buf.push_back(ptr[id]);
    const KernelInfo& k = m.kernels[step.kernel];
    if (k.zero_outputs)
      for (int id : step.writes)
        if (b.nbytes[id] > 0) d.check(d.memset_d8_async(ptr[id], 0, b.nbytes[id], stream), "cuMemsetD8Async (outputs)");
    BoundRun::Launch made;
    if (growing) made = step_launch(m, step, b);
    const BoundRun::Launch& l = growing ? made : run.launches[i];
    if (k.library_call && k.kind == KernelKind::Gemm) {
      run_gemm(s, k, l.gemm, buf, stream);
    } else if (k.library_call) {
      run_conv(s, k, l.conv, buf, stream);
    } else {
      CUdeviceptr workspace =
          l.workspace_bytes > 0 ? kernel_workspace(s, d, step.kernel, l.workspace_bytes, stream) : 0;
      kernel_params(buf, l.sizes, workspace, s.params);
      CUresult r = d.launch(s.functions[step.kernel], l.grid[0], l.grid[1], l.grid[2], k.block[0], k.block[1],
                            k.block[2], k.shared_bytes, stream, s.params.data(), nullptr);
      if (r != CUDA_SUCCESS) d.check(r, ("cuLaunchKernel " + k.name).c_str());
    }
    if (m.step_observer) m.step_observer(step, false);
    inspect(step);
  }

  if (!b.complete) throw BadModule("manifest.json: a data-dependent size was never produced by its fallback step");
  for (size_t i = 0; i < num_outputs; ++i) {
    int id = m.output_values[i];
    if (m.values[id].where != ValueInfo::Where::Output && b.nbytes[id] > 0)
      d.check(d.copy_dtod_async(reinterpret_cast<CUdeviceptr>(outputs[i].data), ptr[id], b.nbytes[id], stream),
              "cuMemcpyDtoDAsync");
  }
}

void run_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs,
              void* stream) {
  enqueue_cuda(m, inputs, num_inputs, outputs, num_outputs, stream);
  const Driver& d = driver();
  d.check(d.stream_sync(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

LibraryRunner::LibraryRunner() : state_(new CudaState) { state_->ctx = current_context(driver()); }

int LibraryRunner::run(const KernelInfo& k, const std::vector<CUdeviceptr>& buffers,
                       const std::map<std::string, int64_t>& sizes, CUstream stream) {
  Binding b;
  b.symbols = sizes;
  if (k.library_call && k.kind == KernelKind::Gemm) return run_gemm(*state_, k, gemm_problem(k, b), buffers, stream);
  if (k.library_call) return run_conv(*state_, k, conv_problem(k, b), buffers, stream);
  throw CudaError("kernel '" + k.name + "' is generated code, not a library call");
}

std::string capture_blocker(const Module& m) {
  for (const StepInfo& step : m.steps)
    if (step.fallback) return "host fallback node '" + step.node + "' (it synchronizes with the host)";
  for (const Guard& g : m.guards)
    if (g.kind == Guard::Kind::ScalarEquals) return "guard '" + g.text + "' reads an input's value on the host";
  return "";
}

CudaGraph::~CudaGraph() {
  const Driver& d = Driver::get();
  if (exec_) d.graph_exec_destroy(static_cast<CUgraphExec>(exec_));
}

void CudaGraph::launch(void* stream) {
  const Driver& d = driver();
  d.check(d.graph_launch(static_cast<CUgraphExec>(exec_), static_cast<CUstream>(stream)), "cuGraphLaunch");
}

std::unique_ptr<CudaGraph> capture_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                                        size_t num_outputs, void* stream_handle) {
  std::string blocker = capture_blocker(m);
  if (!blocker.empty()) throw InvalidArgument("cannot capture a CUDA graph: " + blocker);
  if (!stream_handle) throw InvalidArgument("cannot capture a CUDA graph on the legacy default stream");
  // One plain run first: loading the module, the arena, cuBLASLt's handle and
  // workspace allocate, which a capture does not allow.
  run_cuda(m, inputs, num_inputs, outputs, num_outputs, stream_handle);
  std::unique_ptr<CudaGraph> graph = capture_stream(
      stream_handle, [&] { enqueue_cuda(m, inputs, num_inputs, outputs, num_outputs, stream_handle); });
  // What the captured launches read that the module may replace later.
  const CudaState& s = *m.cuda;
  graph->memory_ = {s.arena, s.bound.front().constants};
  for (const CudaState::KernelWorkspace& w : s.kernel_workspaces) graph->memory_.push_back(w.ptr);
  return graph;
}

std::unique_ptr<CudaGraph> capture_stream(void* stream_handle, const std::function<void()>& enqueue) {
  const Driver& d = driver();
  auto stream = static_cast<CUstream>(stream_handle);
  d.check(d.begin_capture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  CUgraph graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    if (d.end_capture(stream, &graph) == CUDA_SUCCESS && graph) d.graph_destroy(graph);
    throw;
  }
  d.check(d.end_capture(stream, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  CUresult r = d.graph_instantiate(&exec, graph, 0);
  d.graph_destroy(graph);
  d.check(r, "cuGraphInstantiate");
  auto g = std::make_unique<CudaGraph>();
  g->exec_ = exec;
  return g;
}

namespace device {

std::string name() {
  const Driver& d = driver();
  current_context(d);
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  char text[256] = {};
  d.check(d.device_name(text, sizeof text - 1, dev), "cuDeviceGetName");
  return text;
}

std::pair<int, int> compute_capability() {
  const Driver& d = driver();
  current_context(d);
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  int major = 0, minor = 0;
  d.check(d.device_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  d.check(d.device_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  return {major, minor};
}

void* alloc(size_t nbytes) {
  const Driver& d = driver();
  current_context(d);
  CUdeviceptr p = 0;
  d.check(d.mem_alloc(&p, std::max<size_t>(nbytes, 1)), "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}

void release(void* p) {
  if (p) Driver::get().mem_free(reinterpret_cast<CUdeviceptr>(p));
}

// Complete on return, so that work on any stream sees the data: a cuMemcpyHtoD
// from pageable memory may return before its DMA lands, and non-blocking
// streams do not wait for the legacy stream it runs on.
void upload(void* dst, const void* src, size_t nbytes) {
  const Driver& d = driver();
  if (!nbytes) return;
  d.check(d.copy_htod_async(reinterpret_cast<CUdeviceptr>(dst), src, nbytes, nullptr), "cuMemcpyHtoDAsync");
  d.check(d.stream_sync(nullptr), "cuStreamSynchronize");
}

void download(void* dst, const void* src, size_t nbytes) {
  const Driver& d = driver();
  if (nbytes) d.check(d.copy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), nbytes), "cuMemcpyDtoH");
}

void copy_async(void* dst, const void* src, size_t nbytes, void* stream) {
  const Driver& d = driver();
  if (nbytes)
    d.check(d.copy_dtod_async(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), nbytes,
                              static_cast<CUstream>(stream)),
            "cuMemcpyDtoDAsync");
}

void copy_batch_async(const std::vector<void*>& dsts, const std::vector<const void*>& srcs,
                      const std::vector<size_t>& nbytes, void* stream) {
  const Driver& d = driver();
  if (dsts.size() != srcs.size() || dsts.size() != nbytes.size())
    throw InvalidArgument("copy_batch_async: " + std::to_string(dsts.size()) + " destinations, " +
                          std::to_string(srcs.size()) + " sources and " + std::to_string(nbytes.size()) + " sizes");
  if (d.copy_batch_async) {
    std::vector<CUdeviceptr> to, from;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < dsts.size(); ++i) {
      if (nbytes[i] == 0) continue;
      to.push_back(reinterpret_cast<CUdeviceptr>(dsts[i]));
      from.push_back(reinterpret_cast<CUdeviceptr>(srcs[i]));
      sizes.push_back(nbytes[i]);
    }
    // Every source is read in stream order: the stream's earlier work may write it.
    CUmemcpyAttributes order{};
    order.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first = 0;
    if (sizes.size() > 1 && d.copy_batch_async(to.data(), from.data(), sizes.data(), sizes.size(), &order, &first, 1,
                                               static_cast<CUstream>(stream)) == CUDA_SUCCESS)
      return;
  }
  for (size_t i = 0; i < dsts.size(); ++i) copy_async(dsts[i], srcs[i], nbytes[i], stream);
}

void* create_stream() {
  const Driver& d = driver();
  current_context(d);
  CUstream s = nullptr;
  d.check(d.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return s;
}

void destroy_stream(void* stream) {
  if (stream) Driver::get().stream_destroy(static_cast<CUstream>(stream));
}

void sync(void* stream) {
  const Driver& d = driver();
  d.check(d.stream_sync(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

Timer::Timer() {
  const Driver& d = driver();
  current_context(d);
  CUevent a = nullptr, b = nullptr;
  d.check(d.event_create(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  begin_ = a;
  d.check(d.event_create(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  end_ = b;
}

Timer::~Timer() {
  const Driver& d = Driver::get();
  for (void* e : {begin_, end_})
    if (e) d.event_destroy(static_cast<CUevent>(e));
}

void Timer::start(void* stream) {
  const Driver& d = driver();
  d.check(d.event_record(static_cast<CUevent>(begin_), static_cast<CUstream>(stream)), "cuEventRecord");
}

void Timer::stop(void* stream) {
  const Driver& d = driver();
  d.check(d.event_record(static_cast<CUevent>(end_), static_cast<CUstream>(stream)), "cuEventRecord");
}

double Timer::elapsed_ms() {
  const Driver& d = driver();
  d.check(d.event_sync(static_cast<CUevent>(end_)), "cuEventSynchronize");
  float ms = 0;
  d.check(d.event_elapsed(&ms, static_cast<CUevent>(begin_), static_cast<CUevent>(end_)), "cuEventElapsedTime");
  return ms;
}

}  // namespace device

}  // namespace tcc::runtime
