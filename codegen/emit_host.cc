// Host C++ for every kernel: plain loops over the domain, computing each value
// with the same expressions the CUDA kernels use (codegen/emit_c.h); the
// template kinds' from their template files (codegen/template_kernel.h).
#include "codegen/emit.h"

#include "codegen/emit_c.h"
#include "codegen/template_kernel.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

using emitc::define;
using emitc::size_expr;
using kir::Op;

class HostKernel : emitc::CodeWriter {
 public:
  explicit HostKernel(const kir::Kernel& k) : k_(k) {}

  std::string print() {
    out_ += emitc::host_signature(k_);
    // On the GPU the runtime zeroes these outputs, or copies the one output's
    // initial value, before the launch; here the kernel does.
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      if (!k_.buffers[b].output || (!k_.zero_outputs && k_.copy_from < 0)) continue;
      SymExpr numel = SymExpr::constant(1);
      for (const SymExpr& d : k_.buffers[b].shape) numel = numel * d;
      std::string from = k_.zero_outputs ? "0" : "p" + std::to_string(k_.copy_from) + "[z]";
      line("for (int64_t z = 0, z_end = " + size_expr(numel) + "; z < z_end; ++z) p" + std::to_string(b) +
           "[z] = " + from + ";");
    }
    size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
    open_loops(0, outer);
    if (k_.kind == kir::Kind::Reduction) reduction();
    else elementwise();
    close_loops(outer);
    out_ += "}\n";
    return out_;
  }

 private:

  void open_loops(size_t begin, size_t end) {
    for (size_t d = begin; d < end; ++d) {
      std::string c = "c" + std::to_string(d);
      line("for (int64_t " + c + " = 0, " + c + "_end = " + size_expr(k_.domain[d]) + "; " + c + " < " + c +
           "_end; ++" + c + ") {");
      ++depth_;
    }
  }

  void close_loops(size_t n) {
    for (size_t d = 0; d < n; ++d) {
      --depth_;
      line("}");
    }
  }

  void emit(int i) {
    const kir::Instr& in = k_.body[i];
    if (in.op == Op::Store) out_ += indent() + emitc::store(k_, i, emitc::Target::Host);
    else if (in.op == Op::MatMulAcc) matmul(i);
    else if (in.op == Op::ConvAcc) conv(i);
    else if (in.op == Op::ScanSum) scan(i);
    else out_ += indent() + define(k_, i);
  }

  void elementwise() {
    for (size_t i = 0; i < k_.body.size(); ++i) emit(static_cast<int>(i));
  }

  // Row by row: the passes of emitc::plan_reduction, each a loop over the
  // reduced axes. Reductions accumulate sequentially in the accumulator type.
  void reduction() {
    emitc::ReductionPlan p = emitc::plan_reduction(k_);
    size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
    for (size_t pass = 0; pass < p.passes.size(); ++pass) {
      for (int i : p.row_values[pass]) emit(i);
      bool final = pass == p.reductions.size();
      if (final && p.passes[pass].empty()) break;  // only row values are stored
      std::string acc;
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        acc = "acc" + std::to_string(pass);
        line(std::string(emitc::accumulator_type(r.dtype)) + " " + acc + " = " + emitc::reduce_identity(r) + ";");
      }
      for (int i : p.passes[pass])
        if (k_.body[i].op == Op::ScanSum)
          line(std::string(emitc::accumulator_type(k_.body[i].dtype)) + " s" + std::to_string(i) + " = 0;");
      open_loops(outer, k_.domain.size());
      for (int i : p.passes[pass]) emit(i);
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        line(emitc::reduce_step(r, acc, "v" + std::to_string(r.args[0])));
      }
      close_loops(static_cast<size_t>(k_.reduce_axes));
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        line("const " + std::string(emitc::compute_type(r.dtype)) + " v" + std::to_string(p.reductions[pass]) + " = (" +
             emitc::compute_type(r.dtype) + ")" + acc + ";");
      }
    }
    for (int i : p.row_stores) emit(i);
  }

  // The dot product of GemmDesc's row and column for this point: coordinates
  // before N flatten to batch * m + row, as kernel_ir.h describes.
  void matmul(int i) {
    TCC_CHECK(k_.gemm.has_value()) << "kernel " << k_.name << " has a matmul_acc but no gemm description";
    const kir::GemmDesc& g = *k_.gemm;
    size_t n_axis = k_.domain.size() - 1;
    std::string flat = "0";
    for (size_t d = 0; d < n_axis; ++d)
      flat = d == 0 ? "c0" : "(" + flat + ")*(" + size_expr(k_.domain[d]) + ") + c" + std::to_string(d);
    const kir::Instr& in = k_.body[i];
    const kir::Buffer& a = k_.buffers.at(static_cast<size_t>(g.a));
    const kir::Buffer& b = k_.buffers.at(static_cast<size_t>(g.b));
    // Floats accumulate in double, as the interpreter does; cuBLASLt's order differs anyway.
    DType acc_dtype = is_float(in.dtype) ? DType::F64 : is_signed(in.dtype) ? DType::I64 : DType::U64;
    std::string acc_type = emitc::compute_type(acc_dtype);
    std::string vi = "v" + std::to_string(i);
    line(acc_type + " " + vi + "_acc = 0;");
    line("{");
    ++depth_;
    line("const int64_t flat = " + flat + ", gm = " + size_expr(g.m) + ";");
    line("const int64_t bi = flat / gm, row = flat % gm, col = c" + std::to_string(n_axis) + ";");
    std::string lda = size_expr(g.lda), ldb = size_expr(g.ldb);
    std::string ai = "bi*(" + size_expr(g.stride_a) + ") + " + (g.trans_a ? "q*(" + lda + ") + row" : "row*(" + lda + ") + q");
    std::string bidx = "bi*(" + size_expr(g.stride_b) + ") + " + (g.trans_b ? "col*(" + ldb + ") + q" : "q*(" + ldb + ") + col");
    std::string av = emitc::convert(emitc::decode("p" + std::to_string(g.a) + "[" + ai + "]", a.dtype), a.dtype, acc_dtype);
    std::string bv = emitc::convert(emitc::decode("p" + std::to_string(g.b) + "[" + bidx + "]", b.dtype), b.dtype, acc_dtype);
    std::string step = is_float(in.dtype) ? vi + "_acc += " + av + " * " + bv + ";"
                                          : vi + "_acc = (" + acc_type + ")((uint64_t)" + vi + "_acc + (uint64_t)" + av +
                                                " * (uint64_t)" + bv + ");";
    line("for (int64_t q = 0, q_end = " + size_expr(g.k) + "; q < q_end; ++q) " + step);
    --depth_;
    line("}");
    line("const " + std::string(emitc::compute_type(in.dtype)) + " " + vi + " = " +
         emitc::convert(vi + "_acc", acc_dtype, in.dtype) + ";");
  }

  // The direct convolution of ConvDesc at this point (c0 = n, c1 = output
  // channel, c2.. = output position): a loop over the group's input channels and
  // every tap, skipping taps that fall into the padding.
  void conv(int i) {
    TCC_CHECK(k_.conv.has_value()) << "kernel " << k_.name << " has a conv_acc but no conv description";
    const kir::ConvDesc& d = *k_.conv;
    const kir::Instr& in = k_.body[i];
    const kir::Buffer& x = k_.buffers.at(static_cast<size_t>(d.x));
    const kir::Buffer& w = k_.buffers.at(static_cast<size_t>(d.w));
    // Accumulated in double, as the interpreter does; cuDNN's order differs anyway.
    std::string vi = "v" + std::to_string(i);
    std::string groups = std::to_string(d.groups);
    line("double " + vi + "_acc = 0;");
    line("{");
    ++depth_;
    line("const int64_t cg = (" + size_expr(d.c) + ") / " + groups + ", kg = (" + size_expr(d.k) + ") / " + groups + ";");
    line("const int64_t c_begin = c1 / kg * cg;");
    open_loop("ci", "cg");
    std::string xi = "c0*(" + size_expr(d.c) + ") + c_begin + ci", wi = "c1*cg + ci";
    for (size_t s = 0; s < d.kernel.size(); ++s) {
      std::string r = "r" + std::to_string(s), at = "x" + std::to_string(s);
      open_loop(r, std::to_string(d.kernel[s]));
      line("const int64_t " + at + " = c" + std::to_string(s + 2) + "*" + std::to_string(d.strides[s]) + " - " +
           std::to_string(d.pads[s]) + " + " + r + "*" + std::to_string(d.dilations[s]) + ";");
      line("if (" + at + " < 0 || " + at + " >= " + size_expr(d.in[s]) + ") continue;");
      xi = "(" + xi + ")*(" + size_expr(d.in[s]) + ") + " + at;
      wi = "(" + wi + ")*" + std::to_string(d.kernel[s]) + " + " + r;
    }
    std::string xv = emitc::convert(emitc::decode("p" + std::to_string(d.x) + "[" + xi + "]", x.dtype), x.dtype, DType::F64);
    std::string wv = emitc::convert(emitc::decode("p" + std::to_string(d.w) + "[" + wi + "]", w.dtype), w.dtype, DType::F64);
    line(vi + "_acc += " + xv + " * " + wv + ";");
    close_loops(d.kernel.size() + 1);
    --depth_;
    line("}");
    line("const " + std::string(emitc::compute_type(in.dtype)) + " " + vi + " = " +
         emitc::convert(vi + "_acc", DType::F64, in.dtype) + ";");
  }

  // The running sum s<i> of the row (declared before its pass), then its value here.
  void scan(int i) {
    const kir::Instr& in = k_.body[i];
    kir::Instr sum = in;
    sum.op = Op::ReduceSum;
    std::string acc = "s" + std::to_string(i);
    line(emitc::reduce_step(sum, acc, "v" + std::to_string(in.args.at(0))));
    line("const " + std::string(emitc::compute_type(in.dtype)) + " v" + std::to_string(i) + " = (" +
         emitc::compute_type(in.dtype) + ")" + acc + ";");
  }

  void open_loop(const std::string& var, const std::string& end) {
    line("for (int64_t " + var + " = 0; " + var + " < " + end + "; ++" + var + ") {");
    ++depth_;
  }

  const kir::Kernel& k_;
};

}  // namespace

std::string emit_host(const std::vector<kir::Kernel>& kernels) {
  std::string out = "// Generated by tcc: host kernels.\n";
  out += emitc::prelude(emitc::Target::Host, kernels);
  for (const kir::Kernel& k : kernels) {
    const TemplateKernel* t = template_kernel(k.kind);
    out += "\n" + (t ? t->emit_host(k) : HostKernel(k).print());
  }
  return out;
}

}  // namespace tcc
