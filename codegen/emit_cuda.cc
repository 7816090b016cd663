// CUDA C++ for NVRTC. Pointwise kernels are grid-stride loops over the domain
// (four f32 elements per thread, as float4, when every access is contiguous
// along a static last axis divisible by four); reduction kernels give each row
// one block, whose threads accumulate strided parts of the row and combine them
// with warp shuffles and shared memory. Gemm kernels run through cuBLASLt and
// conv kernels through cuDNN: they emit nothing here.
#include <algorithm>

#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "src/diag/diagnostics.h"

namespace tcc {

namespace {

using emitc::define;
using emitc::size_expr;
using kir::Op;

constexpr int kPointwiseBlock = 256;
constexpr int kSymbolicRowBlock = 256;
constexpr int kVectorWidth = 4;
constexpr int64_t kInt32Limit = int64_t{1} << 31;

bool fits_int32(const SymExpr& e) { return e.is_constant() && e.constant_value() < kInt32Limit; }

bool divisible_by(const SymExpr& e, int64_t d) { return e.exact_div(SymExpr::constant(d)).has_value(); }

// Whether a pointwise kernel can move four f32 elements per access: every
// buffer is f32, every access steps by 1 (stores) or 0 or 1 (loads) along a
// static last axis divisible by four, and every other stride and offset keeps
// the 16-byte alignment of a float4.
bool vectorizes(const kir::Kernel& k) {
  if (k.kind != kir::Kind::Pointwise || k.domain.empty()) return false;
  const SymExpr& last = k.domain.back();
  if (!last.is_constant() || last.constant_value() % kVectorWidth != 0 || last.constant_value() == 0) return false;
  for (const kir::Buffer& b : k.buffers)
    if (b.dtype != DType::F32) return false;
  bool any_contiguous = false;
  for (const kir::Instr& in : k.body) {
    if (in.op != Op::Load && in.op != Op::Store) continue;
    const SymExpr& s = in.index.strides.back();
    bool contiguous = s == SymExpr::constant(1);
    if (!contiguous && (in.op == Op::Store || s != SymExpr())) return false;
    any_contiguous |= contiguous;
    if (!divisible_by(in.index.offset, kVectorWidth)) return false;
    for (size_t d = 0; d + 1 < in.index.strides.size(); ++d)
      if (!divisible_by(in.index.strides[d], kVectorWidth)) return false;
  }
  return any_contiguous;
}

// A power of two from 32 to 1024 giving each thread about four elements of a
// static row; rows of symbolic length get a fixed middle size.
int reduction_block(const kir::Kernel& k) {
  SymExpr len = row_length(k);
  if (!len.is_constant()) return kSymbolicRowBlock;
  int64_t want = (len.constant_value() + 3) / 4;
  int b = 32;
  while (b < 1024 && b < want) b *= 2;
  return b;
}

class CudaKernel {
 public:
  explicit CudaKernel(const kir::Kernel& k) : k_(k) {}

  std::string print() {
    out_ += "extern \"C\" __global__ void " + k_.name + "(";
    std::string sep;
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      const kir::Buffer& buf = k_.buffers[b];
      out_ += sep + (buf.output ? "" : "const ") + emitc::storage_type(buf.dtype) + "* __restrict__ p" + std::to_string(b);
      sep = ", ";
    }
    for (const std::string& s : k_.size_params) {
      out_ += sep + "int64_t " + emitc::size_var(s);
      sep = ", ";
    }
    out_ += ") {\n";
    if (k_.kind == kir::Kind::Reduction) reduction();
    else if (vectorizes(k_)) vector_pointwise();
    else pointwise();
    out_ += "}\n";
    return out_;
  }

 private:
  void line(const std::string& s) { out_ += std::string(depth_ * 2, ' ') + s + "\n"; }
  void open(const std::string& s) {
    line(s + " {");
    ++depth_;
  }
  void close() {
    --depth_;
    line("}");
  }

  void emit(int i) {
    const kir::Instr& in = k_.body[i];
    TCC_CHECK(in.op != Op::MatMulAcc && in.op != Op::ConvAcc)
        << "kernel " << k_.name << ": " << op_name(in.op) << " outside a library kernel";
    out_ += std::string(depth_ * 2, ' ') + (in.op == Op::Store ? emitc::store(k_, i) : define(k_, i));
  }

  // Coordinates c<begin>..c<end-1> of the flat position `flat` (an int64
  // expression) within those axes, in 32-bit arithmetic when the axes are
  // static and their product is small: 64-bit division is slow on the GPU.
  void coordinates(const std::string& flat, size_t begin, size_t end) {
    if (begin == end) return;
    bool narrow = true;
    int64_t extent = 1;
    for (size_t d = begin; d < end && narrow; ++d) {
      narrow = k_.domain[d].is_constant() && k_.domain[d].constant_value() < kInt32Limit;
      if (narrow) extent *= k_.domain[d].constant_value();
      narrow = narrow && extent < kInt32Limit;
    }
    std::string t = "t" + std::to_string(begin);
    line(narrow ? "uint32_t " + t + " = (uint32_t)(" + flat + ");" : "int64_t " + t + " = " + flat + ";");
    for (size_t d = end; d-- > begin;) {
      std::string c = "c" + std::to_string(d);
      if (d == begin) {
        line("const int64_t " + c + " = " + t + ";");
        break;
      }
      if (k_.domain[d] == SymExpr::constant(1)) {
        line("const int64_t " + c + " = 0;");
        continue;
      }
      std::string e = narrow ? std::to_string(k_.domain[d].constant_value()) + "u" : size_expr(k_.domain[d]);
      if (!k_.domain[d].is_constant() && !k_.domain[d].is_symbol()) e = "(" + e + ")";
      line("const int64_t " + c + " = " + t + " % " + e + ";");
      line(t + " /= " + e + ";");
    }
  }

  void pointwise() {
    line("const int64_t n = " + size_expr(domain_size(k_)) + ";");
    open("for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)");
    coordinates("i", 0, k_.domain.size());
    for (size_t i = 0; i < k_.body.size(); ++i) emit(static_cast<int>(i));
    close();
  }

  // Each thread takes four consecutive elements along the last axis: contiguous
  // loads and stores are float4 accesses, loads broadcast along the last axis
  // are scalars, and the body runs once per lane.
  void vector_pointwise() {
    line("const int64_t n = " + size_expr(domain_size(k_).floordiv(SymExpr::constant(kVectorWidth))) + ";");
    open("for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)");
    coordinates("i * 4", 0, k_.domain.size());
    std::vector<int> stores;
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const kir::Instr& in = k_.body[i];
      std::string id = std::to_string(i);
      if (in.op == Op::Load && in.index.strides.back() == SymExpr::constant(1)) {
        line("const float4 q" + id + " = *(const float4*)(p" + std::to_string(in.buffer) + " + " +
             emitc::index_expr(in.index) + ");");
      } else if (in.op == Op::Load) {
        emit(static_cast<int>(i));
      } else if (in.op == Op::Store) {
        line("float4 q" + id + ";");
        stores.push_back(static_cast<int>(i));
      }
    }
    line("#pragma unroll");
    open("for (int l = 0; l < 4; ++l)");
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const kir::Instr& in = k_.body[i];
      std::string id = std::to_string(i);
      if (in.op == Op::Load && in.index.strides.back() == SymExpr::constant(1)) line("const float v" + id + " = (&q" + id + ".x)[l];");
      else if (in.op == Op::Store) line("(&q" + id + ".x)[l] = v" + std::to_string(in.args.at(0)) + ";");
      else if (in.op != Op::Load) emit(static_cast<int>(i));
    }
    close();
    for (int s : stores)
      line("*(float4*)(p" + std::to_string(k_.body[s].buffer) + " + " + emitc::index_expr(k_.body[s].index) + ") = q" +
           std::to_string(s) + ";");
    close();
  }

  void reduction() {
    emitc::ReductionPlan p = emitc::plan_reduction(k_);
    size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
    SymExpr rows = row_count(k_), len = row_length(k_);
    bool narrow_len = fits_int32(len);
    line("const int64_t rows = " + size_expr(rows) + ", len = " + size_expr(len) + ";");
    open("for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)");
    coordinates("r", 0, outer);
    for (size_t pass = 0; pass < p.passes.size(); ++pass) {
      for (int i : p.row_values[pass]) emit(i);
      bool final = pass == p.reductions.size();
      if (final && p.passes[pass].empty()) break;  // only row values are stored
      std::string acc = "acc" + std::to_string(pass);
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        line(std::string(emitc::accumulator_type(r.dtype)) + " " + acc + " = " + emitc::reduce_identity(r) + ";");
      }
      open(std::string("for (") + (narrow_len ? "int" : "int64_t") + " j = threadIdx.x; j < len; j += blockDim.x)");
      coordinates("j", outer, k_.domain.size());
      for (int i : p.passes[pass]) emit(i);
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        line(emitc::reduce_step(r, acc, "v" + std::to_string(r.args[0])));
      }
      close();
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        std::string A = emitc::accumulator_type(r.dtype);
        line("const " + std::string(emitc::compute_type(r.dtype)) + " v" + std::to_string(p.reductions[pass]) + " = (" +
             emitc::compute_type(r.dtype) + ")tcc_block_reduce<" + A + ">(" + acc + ", " + combiner(r.op) + "(), " +
             emitc::reduce_identity(r) + ");");
      }
    }
    if (!p.row_stores.empty()) {
      open("if (threadIdx.x == 0)");
      for (int i : p.row_stores) emit(i);
      close();
    }
    close();
  }

  static const char* combiner(Op op) {
    switch (op) {
      case Op::ReduceSum: return "tcc_sum";
      case Op::ReduceProd: return "tcc_prod";
      case Op::ReduceMax: return "tcc_maxop";
      case Op::ReduceMin: return "tcc_minop";
      default: TCC_CHECK(false) << op_name(op) << " is not a reduction"; return "";
    }
  }

  const kir::Kernel& k_;
  std::string out_;
  int depth_ = 1;
};

}  // namespace

std::string emit_cuda(const std::vector<kir::Kernel>& kernels) {
  std::string out = "// Generated by tcc: CUDA kernels for NVRTC.\n";
  out += emitc::prelude(emitc::Target::Cuda);
  for (const kir::Kernel& k : kernels)
    if (k.kind != kir::Kind::Gemm && k.kind != kir::Kind::Conv) out += "\n" + CudaKernel(k).print();
  return out;
}

LaunchConfig launch_config(const kir::Kernel& k) {
  LaunchConfig c;
  switch (k.kind) {
    case kir::Kind::Pointwise: {
      int per_block = kPointwiseBlock * (vectorizes(k) ? kVectorWidth : 1);
      c.grid[0] = (domain_size(k) + SymExpr::constant(per_block - 1)).floordiv(SymExpr::constant(per_block));
      c.block[0] = kPointwiseBlock;
      break;
    }
    case kir::Kind::Reduction:
      c.grid[0] = row_count(k);
      c.block[0] = reduction_block(k);
      break;
    case kir::Kind::Gemm:  // cuBLASLt
    case kir::Kind::Conv:  // cuDNN
      break;
  }
  return c;
}

}  // namespace tcc
