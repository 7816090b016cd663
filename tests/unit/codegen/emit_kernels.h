// Hand-built kernels the emitter and toolchain tests share: each kind of
// kernel the lowering makes (pointwise with broadcasts and transposes,
// reductions of short, long and symbolic rows, softmax, gemm epilogues, f16,
// 8-bit float and 4-bit casts, integer arithmetic), built instruction by instruction; and the text
// of one kernel in emitted CUDA.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace tcc::emit_kernels {

using kir::Op;

inline SymExpr S(int64_t v) { return SymExpr::constant(v); }
inline SymExpr sym(const std::string& n) { return SymExpr::symbol(n); }

// Builds a kernel instruction by instruction.
class KernelBuilder {
 public:
  KernelBuilder(std::string name, kir::Kind kind, std::vector<SymExpr> domain, int reduce_axes = 0) {
    k_.name = std::move(name);
    k_.kind = kind;
    k_.domain = std::move(domain);
    k_.reduce_axes = reduce_axes;
  }
  int buffer(const std::string& name, DType t, std::vector<SymExpr> shape, bool output = false) {
    k_.buffers.push_back(kir::Buffer{name, t, std::move(shape), output});
    return static_cast<int>(k_.buffers.size()) - 1;
  }
  int load(int b, DType t, std::vector<SymExpr> strides, SymExpr offset = {}, bool row = false) {
    kir::Instr in;
    in.op = Op::Load;
    in.dtype = t;
    in.buffer = b;
    in.index = kir::Index{std::move(strides), std::move(offset)};
    in.row = row;
    return push(in);
  }
  int op(Op o, DType t, std::vector<int> args, bool row = false) {
    kir::Instr in;
    in.op = o;
    in.dtype = t;
    in.args = std::move(args);
    in.row = row;
    return push(in);
  }
  int constant(DType t, double v, bool row = true) {
    kir::Instr in;
    in.op = Op::Const;
    in.dtype = t;
    in.value = v;
    in.row = row;
    return push(in);
  }
  int size(DType t, SymExpr e) {
    kir::Instr in;
    in.op = Op::SizeValue;
    in.dtype = t;
    in.size = std::move(e);
    in.row = true;
    return push(in);
  }
  void store(int b, std::vector<SymExpr> strides, int arg, bool row = false) {
    kir::Instr in;
    in.op = Op::Store;
    in.dtype = k_.buffers[b].dtype;
    in.buffer = b;
    in.index = kir::Index{std::move(strides), SymExpr()};
    in.args = {arg};
    in.row = row;
    push(in);
  }
  kir::Kernel done(std::vector<std::string> sizes = {}) {
    k_.size_params = std::move(sizes);
    return k_;
  }
  kir::Kernel& kernel() { return k_; }

 private:
  int push(const kir::Instr& in) {
    k_.body.push_back(in);
    return static_cast<int>(k_.body.size()) - 1;
  }
  kir::Kernel k_;
};

// y = relu(x + bias) over [b, 8]: bias broadcasts along rows.
inline kir::Kernel add_relu() {
  KernelBuilder kb("k_add_relu", kir::Kind::Pointwise, {sym("b"), S(8)});
  int x = kb.buffer("x", DType::F32, {sym("b"), S(8)});
  int bias = kb.buffer("bias", DType::F32, {S(8)});
  int y = kb.buffer("y", DType::F32, {sym("b"), S(8)}, true);
  int s = kb.op(Op::Add, DType::F32, {kb.load(x, DType::F32, {S(8), S(1)}), kb.load(bias, DType::F32, {S(0), S(1)})});
  kb.store(y, {S(8), S(1)}, kb.op(Op::Relu, DType::F32, {s}));
  return kb.done({"b"});
}

// y[6, 4] = transpose(x[4, 6]) through a permuted load.
inline kir::Kernel transpose() {
  KernelBuilder kb("k_transpose", kir::Kind::Pointwise, {S(6), S(4)});
  int x = kb.buffer("x", DType::F32, {S(4), S(6)});
  int y = kb.buffer("y", DType::F32, {S(6), S(4)}, true);
  kb.store(y, {S(4), S(1)}, kb.load(x, DType::F32, {S(1), S(6)}));
  return kb.done();
}

// Softmax over rows of symbolic length n: max, sum, store.
inline kir::Kernel softmax() {
  KernelBuilder kb("k_softmax", kir::Kind::Reduction, {sym("r"), sym("n")}, 1);
  int x = kb.buffer("x", DType::F32, {sym("r"), sym("n")});
  int y = kb.buffer("y", DType::F32, {sym("r"), sym("n")}, true);
  int v = kb.load(x, DType::F32, {sym("n"), S(1)});
  int mx = kb.op(Op::ReduceMax, DType::F32, {v}, true);
  int e = kb.op(Op::Exp, DType::F32, {kb.op(Op::Sub, DType::F32, {v, mx})});
  int sum = kb.op(Op::ReduceSum, DType::F32, {e}, true);
  kb.store(y, {sym("n"), S(1)}, kb.op(Op::Div, DType::F32, {e, sum}));
  return kb.done({"n", "r"});
}

// Mean over rows, kept as a [r, 1] output: a row value stored once per row.
inline kir::Kernel row_mean() {
  KernelBuilder kb("k_row_mean", kir::Kind::Reduction, {S(3), sym("n")}, 1);
  int x = kb.buffer("x", DType::F32, {S(3), sym("n")});
  int y = kb.buffer("y", DType::F32, {S(3), S(1)}, true);
  int sum = kb.op(Op::ReduceSum, DType::F32, {kb.load(x, DType::F32, {sym("n"), S(1)})}, true);
  kb.store(y, {S(1), S(0)}, kb.op(Op::Div, DType::F32, {sum, kb.size(DType::F32, sym("n"))}, true), true);
  return kb.done({"n"});
}

// D[3, 4] = relu(A[3, 5] B[5, 4] + bias[4]).
inline kir::Kernel gemm_bias_relu() {
  KernelBuilder kb("k_gemm", kir::Kind::Gemm, {S(3), S(4)});
  int a = kb.buffer("a", DType::F32, {S(3), S(5)});
  int b = kb.buffer("b", DType::F32, {S(5), S(4)});
  int bias = kb.buffer("bias", DType::F32, {S(4)});
  int d = kb.buffer("d", DType::F32, {S(3), S(4)}, true);
  kir::GemmDesc g;
  g.a = a;
  g.b = b;
  g.m = S(3);
  g.n = S(4);
  g.k = S(5);
  g.lda = S(5);
  g.ldb = S(4);
  g.ldd = S(4);
  g.bias = bias;
  g.activation = "relu";
  kb.kernel().gemm = g;
  int acc = kb.op(Op::MatMulAcc, DType::F32, {});
  int sum = kb.op(Op::Add, DType::F32, {acc, kb.load(bias, DType::F32, {S(0), S(1)})});
  kb.store(d, {S(4), S(1)}, kb.op(Op::Relu, DType::F32, {sum}));
  return kb.done();
}

// D[2, 3, 4] = A[2, 3, 5] B[2, 4, 5]^T per batch.
inline kir::Kernel batched_gemm_trans_b() {
  KernelBuilder kb("k_bgemm", kir::Kind::Gemm, {S(2), S(3), S(4)});
  int a = kb.buffer("a", DType::F32, {S(2), S(3), S(5)});
  int b = kb.buffer("b", DType::F32, {S(2), S(4), S(5)});
  int d = kb.buffer("d", DType::F32, {S(2), S(3), S(4)}, true);
  kir::GemmDesc g;
  g.a = a;
  g.b = b;
  g.trans_b = true;
  g.batch = S(2);
  g.m = S(3);
  g.n = S(4);
  g.k = S(5);
  g.lda = S(5);
  g.ldb = S(5);
  g.ldd = S(4);
  g.stride_a = S(15);
  g.stride_b = S(20);
  g.stride_d = S(12);
  kb.kernel().gemm = g;
  kb.store(d, {S(12), S(4), S(1)}, kb.op(Op::MatMulAcc, DType::F32, {}));
  return kb.done();
}

// h = f16(x * 3) and y = f32(h) + 1 over [n]: the cast rounds through f16.
inline kir::Kernel f16_cast() {
  KernelBuilder kb("k_f16_cast", kir::Kind::Pointwise, {sym("n")});
  int x = kb.buffer("x", DType::F32, {sym("n")});
  int h = kb.buffer("h", DType::F16, {sym("n")}, true);
  int y = kb.buffer("y", DType::F32, {sym("n")}, true);
  int m = kb.op(Op::Mul, DType::F32, {kb.load(x, DType::F32, {S(1)}), kb.constant(DType::F32, 3)});
  int c = kb.op(Op::Cast, DType::F16, {m});
  kb.store(h, {S(1)}, c);
  kb.store(y, {S(1)}, kb.op(Op::Add, DType::F32, {kb.op(Op::Cast, DType::F32, {c}), kb.constant(DType::F32, 1)}));
  return kb.done({"n"});
}

// q = t(x) and y = f32(q) + 1 over [n], fused, and z = f32(b) of an input b
// of the 8-bit float or 4-bit type t: the conversions emitted for t, both ways.
inline kir::Kernel narrow_cast(DType t) {
  KernelBuilder kb("k_" + std::string(dtype_name(t)) + "_cast", kir::Kind::Pointwise, {sym("n")});
  int x = kb.buffer("x", DType::F32, {sym("n")});
  int b = kb.buffer("b", t, {sym("n")});
  int q = kb.buffer("q", t, {sym("n")}, true);
  int y = kb.buffer("y", DType::F32, {sym("n")}, true);
  int z = kb.buffer("z", DType::F32, {sym("n")}, true);
  int c = kb.op(Op::Cast, t, {kb.load(x, DType::F32, {S(1)})});
  kb.store(q, {S(1)}, c);
  kb.store(y, {S(1)}, kb.op(Op::Add, DType::F32, {kb.op(Op::Cast, DType::F32, {c}), kb.constant(DType::F32, 1)}));
  kb.store(z, {S(1)}, kb.op(Op::Cast, DType::F32, {kb.load(b, t, {S(1)})}));
  return kb.done({"n"});
}

// i4(a) and u4(a) of an i64 a over [n]: integer casts that wrap.
inline kir::Kernel int4_wrap() {
  KernelBuilder kb("k_int4_wrap", kir::Kind::Pointwise, {sym("n")});
  int a = kb.buffer("a", DType::I64, {sym("n")});
  int i4 = kb.buffer("i4", DType::I4, {sym("n")}, true);
  int u4 = kb.buffer("u4", DType::U4, {sym("n")}, true);
  int la = kb.load(a, DType::I64, {S(1)});
  kb.store(i4, {S(1)}, kb.op(Op::Cast, DType::I4, {la}));
  kb.store(u4, {S(1)}, kb.op(Op::Cast, DType::U4, {la}));
  return kb.done({"n"});
}

// Integer division and both modulo conventions on i64, and a float -> i32 cast
// that saturates; the last output reads (1-n)//2, a negative floor division.
inline kir::Kernel int_ops() {
  KernelBuilder kb("k_int_ops", kir::Kind::Pointwise, {S(6)});
  int a = kb.buffer("a", DType::I64, {S(6)});
  int b = kb.buffer("b", DType::I64, {S(6)});
  int f = kb.buffer("f", DType::F32, {S(6)});
  int div = kb.buffer("div", DType::I64, {S(6)}, true);
  int mod = kb.buffer("mod", DType::I64, {S(6)}, true);
  int fmod = kb.buffer("fmod", DType::I64, {S(6)}, true);
  int sat = kb.buffer("sat", DType::I32, {S(6)}, true);
  int half = kb.buffer("half", DType::I64, {S(6)}, true);
  int la = kb.load(a, DType::I64, {S(1)}), lb = kb.load(b, DType::I64, {S(1)});
  kb.store(div, {S(1)}, kb.op(Op::Div, DType::I64, {la, lb}));
  kb.store(mod, {S(1)}, kb.op(Op::Mod, DType::I64, {la, lb}));
  kb.store(fmod, {S(1)}, kb.op(Op::Fmod, DType::I64, {la, lb}));
  kb.store(sat, {S(1)}, kb.op(Op::Cast, DType::I32, {kb.load(f, DType::F32, {S(1)})}));
  kb.store(half, {S(1)}, kb.size(DType::I64, (S(1) - sym("n")).floordiv(S(2))));
  return kb.done({"n"});
}

// y[r] = 0.5 * sum of row r of x[rows, length].
inline kir::Kernel half_row_sum(const std::string& name, int64_t rows, int64_t length) {
  KernelBuilder kb(name, kir::Kind::Reduction, {S(rows), S(length)}, 1);
  int x = kb.buffer("x", DType::F32, {S(rows), S(length)});
  int y = kb.buffer("y", DType::F32, {S(rows)}, true);
  int sum = kb.op(Op::ReduceSum, DType::F32, {kb.load(x, DType::F32, {S(length), S(1)})}, true);
  kb.store(y, {S(1), S(0)}, kb.op(Op::Mul, DType::F32, {sum, kb.constant(DType::F32, 0.5)}, true), true);
  return kb.done();
}

// Short static rows, one block per row.
inline kir::Kernel short_row_sum() { return half_row_sum("k_short_sum", 3, 40); }

// Few long rows, a split reduction on the GPU.
inline kir::Kernel long_row_sum() { return half_row_sum("k_long_sum", 4, 65536); }

// y[r] = max of row r of x[2, n] as i64: rows of symbolic length split too.
inline kir::Kernel symbolic_row_max() {
  KernelBuilder kb("k_row_max", kir::Kind::Reduction, {S(2), sym("n")}, 1);
  int x = kb.buffer("x", DType::I64, {S(2), sym("n")});
  int y = kb.buffer("y", DType::I64, {S(2)}, true);
  kb.store(y, {S(1), S(0)}, kb.op(Op::ReduceMax, DType::I64, {kb.load(x, DType::I64, {sym("n"), S(1)})}, true), true);
  return kb.done({"n"});
}

inline std::vector<kir::Kernel> all_kernels() {
  return {add_relu(),
          transpose(),
          softmax(),
          row_mean(),
          gemm_bias_relu(),
          batched_gemm_trans_b(),
          f16_cast(),
          narrow_cast(DType::F8E4M3FN),
          narrow_cast(DType::F8E4M3FNUZ),
          narrow_cast(DType::F8E5M2),
          narrow_cast(DType::F8E5M2FNUZ),
          narrow_cast(DType::F4E2M1),
          narrow_cast(DType::I4),
          narrow_cast(DType::U4),
          int4_wrap(),
          int_ops(),
          short_row_sum(),
          long_row_sum(),
          symbolic_row_max()};
}

// The CUDA text of one kernel of emit_cuda's output, from its signature to its closing brace.
inline std::string kernel_text(const std::string& cu, const std::string& name) {
  size_t at = cu.find(" void " + name + "(");
  if (at == std::string::npos) return "";
  at = cu.rfind("extern \"C\" __global__", at);
  return cu.substr(at, cu.find("\n}\n", at) + 3 - at);
}

}  // namespace tcc::emit_kernels
