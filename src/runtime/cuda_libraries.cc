// cuBLASLt and cuDNN calls (see cuda_libraries.h).
#include "cuda_libraries.h"

#include <dlfcn.h>

#include <algorithm>

namespace tcc::runtime {

namespace {

#define TCC_CUBLASLT_ENTRIES(X) \
  X(create, cublasLtCreate, "cublasLtCreate") \
  X(destroy, cublasLtDestroy, "cublasLtDestroy") \
  X(matmul, cublasLtMatmul, "cublasLtMatmul") \
  X(desc_create, cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate") \
  X(desc_destroy, cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy") \
  X(desc_set, cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute") \
  X(layout_create, cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate") \
  X(layout_destroy, cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy") \
  X(layout_set, cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute") \
  X(pref_create, cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate") \
  X(pref_destroy, cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy") \
  X(pref_set, cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute") \
  X(heuristic, cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic")

struct CublasLt {
  TCC_CUBLASLT_ENTRIES(TCC_ENTRY_MEMBER)
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
    bool ok = lib && TCC_RESOLVE_ENTRIES(TCC_CUBLASLT_ENTRIES, lib, lt);
    if (!ok) lt.unavailable = "cuBLASLt (libcublasLt.so.13) cannot be loaded; Gemm kernels need it";
    return lt;
  }
};

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F64: return CUDA_R_64F;
    case DType::I8: return CUDA_R_8I;
    case DType::I32: return CUDA_R_32I;
    default: throw CudaError("cuBLASLt matmul of " + std::string(dtype_name(t)) + " is not supported");
  }
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

// The largest power of two, up to 256 bytes, that a device address is a multiple of.
uint32_t pointer_alignment(CUdeviceptr p) {
  uint32_t align = 256;
  while (align > 1 && p % align != 0) align /= 2;
  return align;
}

}  // namespace

GemmProblem gemm_problem(const KernelInfo& k, const Binding& b) {
  const GemmInfo& g = *k.gemm;
  auto ev = [&](const SymExpr& e) { return evaluate(e, b, k, "gemm"); };
  return {ev(g.batch), ev(g.m), ev(g.n), ev(g.k), ev(g.lda), ev(g.ldb), ev(g.ldd), ev(g.stride_a), ev(g.stride_b),
          ev(g.stride_d)};
}

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

void LibraryCalls::GemmPlan::release() {
  const CublasLt& lt = CublasLt::get();
  for (cublasLtMatrixLayout_t l : {first, second, out})
    if (l) lt.layout_destroy(l);
  if (desc) lt.desc_destroy(desc);
  *this = {};
}

void LibraryCalls::ensure_workspace() {
  const Driver& d = Driver::get();
  if (!workspace_) d.check(d.mem_alloc(&workspace_, kWorkspaceBytes), "cuMemAlloc (library workspace)");
}

int LibraryCalls::gemm(const KernelInfo& k, const GemmProblem& p, const std::vector<CUdeviceptr>& buf,
                       CUstream stream) {
  const GemmInfo& g = *k.gemm;
  const int64_t batch = p.batch, m = p.m, n = p.n, kk = p.k;
  if (batch <= 0 || m <= 0 || n <= 0) return g.algo;
  const CublasLt& lt = CublasLt::get();
  if (!lt_) CublasLt::check(lt.create(&lt_), "cublasLtCreate");
  ensure_workspace();
  const int d_index = k.num_reads;
  DType in_type = k.buffers[g.a].dtype, out_type = k.buffers[d_index].dtype;
  bool f64 = in_type == DType::F64;
  // int8 operands (MatMulInteger's int8 form, src/ops/linalg.cc) accumulate
  // exactly in int32, with int32 alpha and beta.
  bool int8 = in_type == DType::I8;
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
  const std::array<int64_t, kGemmKeySize> key = {
      batch,    m,        n,        kk,       lda,       ldb,       ldd,
      stride_a, stride_b, stride_d, epilogue, g.algo,    g.trans_a, g.trans_b,
      static_cast<int64_t>(in_type), static_cast<int64_t>(out_type), bias_dtype,
      alignments[0].second, alignments[1].second, alignments[2].second, alignments[3].second};

  GemmPlan& plan = gemm_plans_[&k];
  if (!plan.built || plan.key != key) {
    plan.release();
    cublasComputeType_t compute = f64                                ? CUBLAS_COMPUTE_64F
                                  : int8                             ? CUBLAS_COMPUTE_32I
                                  : tf32 && in_type == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                  : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale_type = f64 ? CUDA_R_64F : int8 ? CUDA_R_32I : CUDA_R_32F;
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
    uint64_t workspace_bytes = kWorkspaceBytes;
    CublasLt::check(
        lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes),
        "MAX_WORKSPACE_BYTES");
    for (const auto& [attr, align] : alignments)
      CublasLt::check(lt.pref_set(pref, attr, &align, sizeof align), "MIN_ALIGNMENT");
    cublasLtMatmulHeuristicResult_t ranked[kLibraryAlgos] = {};
    int offered = 0;
    CublasLt::check(lt.heuristic(lt_, plan.desc, plan.first, plan.second, plan.out, plan.out, pref,
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
  int32_t alpha_i32 = static_cast<int32_t>(alpha64), beta_i32 = static_cast<int32_t>(beta64);
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : int8 ? static_cast<const void*>(&alpha_i32) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : int8 ? static_cast<const void*>(&beta_i32) : &beta32;
  cublasStatus_t status =
      lt.matmul(lt_, plan.desc, alpha, reinterpret_cast<void*>(buf[g.b]), plan.first,
                reinterpret_cast<void*>(buf[g.a]), plan.second, beta, reinterpret_cast<void*>(c), plan.out,
                reinterpret_cast<void*>(buf[d_index]), plan.out, &plan.algo, reinterpret_cast<void*>(workspace_),
                kWorkspaceBytes, reinterpret_cast<cudaStream_t>(stream));
  if (status != CUBLAS_STATUS_SUCCESS) CublasLt::check(status, ("cublasLtMatmul (kernel '" + k.name + "')").c_str());
  return plan.rank;
}

int LibraryCalls::conv(const KernelInfo& k, const ConvProblem& p, const std::vector<CUdeviceptr>& buf,
                       CUstream stream, CUfunction epilogue) {
  const ConvInfo& c = *k.conv;
  if (std::find(p.ydims.begin(), p.ydims.end(), 0) != p.ydims.end()) return c.algo;
  if (!dnn_) dnn_ = cudnn_create();
  ensure_workspace();
  cudnn_set_stream(dnn_, stream);
  auto ptr = [&](int index) { return reinterpret_cast<void*>(buf[static_cast<size_t>(index)]); };
  ConvOperands ops{ptr(c.x), ptr(c.w), ptr(k.num_reads), c.bias >= 0 ? ptr(c.bias) : nullptr,
                   c.residual >= 0 ? ptr(c.residual) : nullptr, reinterpret_cast<void*>(workspace_)};
  ConvConfig config{c.bias >= 0, c.residual >= 0, c.activation == "relu", cudnn_type(k.buffers[k.num_reads].dtype),
                    tf32, c.algo, {}};
  const void* operands[] = {ops.x, ops.w, ops.y, ops.bias, ops.residual};
  for (size_t i = 0; i < config.alignments.size(); ++i)
    if (operands[i])
      config.alignments[i] = std::min<int64_t>(16, pointer_alignment(reinterpret_cast<CUdeviceptr>(operands[i])));
  std::unique_ptr<CudnnConvPlan>& plan = conv_plans_[&k];
  if (!plan || !plan->serves(p, config)) {
    plan.reset();
    plan = std::make_unique<CudnnConvPlan>(dnn_, p, config, kWorkspaceBytes, "kernel '" + k.name + "' conv");
  }
  plan->run(dnn_, ops);
  if (!plan->fused() && c.has_epilogue()) launch_conv_epilogue(k, p, ops, epilogue, stream);
  return plan->rank();
}

void LibraryCalls::launch_conv_epilogue(const KernelInfo& k, const ConvProblem& p, const ConvOperands& ops,
                                        CUfunction epilogue, CUstream stream) {
  if (!epilogue)
    throw CudaError("kernel '" + k.name + "': cuDNN fuses no engine with its epilogue and no " + k.conv_epilogue() +
                    " was loaded to run it");
  int64_t channels = p.ydims[1], planes = p.ydims[0] * channels, plane = 1, relu = k.conv->activation == "relu";
  for (size_t i = 2; i < p.ydims.size(); ++i) plane *= p.ydims[i];
  // A block row per plane; a plane smaller than a block takes the warps it fills.
  const int64_t block = std::min<int64_t>(256, (plane + 31) / 32 * 32);
  const int64_t blocks_along = std::min<int64_t>(65535, (plane + block - 1) / block);
  void *y = ops.y, *bias = ops.bias, *residual = ops.residual;
  void* params[] = {&y, &bias, &residual, &planes, &plane, &channels, &relu};
  const Driver& d = Driver::get();
  CUresult r = d.launch(epilogue, static_cast<unsigned>(planes), static_cast<unsigned>(blocks_along), 1,
                        static_cast<unsigned>(block), 1, 1, 0, stream, params, nullptr);
  if (r != CUDA_SUCCESS) d.check(r, ("cuLaunchKernel (kernel '" + k.name + "' conv epilogue)").c_str());
}

void LibraryCalls::release() {
  if (workspace_) Driver::get().mem_free(workspace_);
  conv_plans_.clear();
  if (dnn_) cudnn_destroy(dnn_);
  for (auto& [kernel, plan] : gemm_plans_) plan.release();
  if (lt_) CublasLt::get().destroy(lt_);
  *this = {};
}

}  // namespace tcc::runtime
