#include "codegen/topk_template.h"

#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxRows = 8;  // rows a block takes, as reductions' rows_per_block

const kir::TopKDesc& desc(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::TopK && k.topk.has_value()) << k.name << " is not a topk kernel";
  return *k.topk;
}

std::string expr(const SymExpr& e) { return "(" + emitc::size_expr(e) + ")"; }

DType x_dtype(const kir::Kernel& k) { return k.buffers[static_cast<size_t>(desc(k).x)].dtype; }

// The type elements are compared in: exact for every dtype, and one a warp shuffle moves.
std::string order_type(DType t) {
  if (is_float(t)) return emitc::compute_type(t);
  return is_signed(t) ? "int64_t" : "uint64_t";
}

// `before(av, aj, bv, bj)`: whether element (av, aj) comes first in TopK's
// order. NaN is above every number and equal to NaN (the interpreter's
// compare_elements); equal values go by index.
std::string before_lambda(const kir::Kernel& k) {
  const DType t = x_dtype(k);
  const std::string v = order_type(t);
  auto above = [&](const std::string& a, const std::string& b) {
    return is_float(t) ? "(" + a + " != " + a + " ? " + b + " == " + b + " : " + a + " > " + b + ")"
                       : "(" + a + " > " + b + ")";
  };
  const std::string equal = is_float(t) ? "(av == bv || (av != av && bv != bv))" : "(av == bv)";
  const std::string first = desc(k).largest ? above("av", "bv") : above("bv", "av");
  return "auto before = [](" + v + " av, int64_t aj, " + v + " bv, int64_t bj) { return " + first + " || (" + equal +
         " && aj < bj); };";
}

// The kernel's stores, in body order: each writes the selection's value or its index.
std::vector<const kir::Instr*> stores(const kir::Kernel& k) {
  std::vector<const kir::Instr*> out;
  for (const kir::Instr& in : k.body)
    if (in.op == kir::Op::Store) out.push_back(&in);
  return out;
}

// The lines both targets share, around their own loops over rows and lanes.
class TopKWriter : public emitc::CodeWriter {
 protected:
  explicit TopKWriter(const kir::Kernel& k)
      : k_(k), t_(desc(k)), v_(order_type(x_dtype(k))), inner_(expr(k.domain[2])) {}

  // The row at (o, i): x, and the previous selection (none yet).
  void row_start() {
    const std::string x = emitc::storage_type(x_dtype(k_));
    line("const " + x + "* x = p" + std::to_string(t_.x) + " + o * " + std::to_string(t_.length) + " * " + inner_ +
         " + i;");
    line(v_ + " pv = 0;");
    line("int64_t pj = -1;");
  }

  // The scan of elements j from `first` by `step`: the best one after the previous selection.
  void scan(const std::string& first, const std::string& step) {
    line(v_ + " bv = 0;");
    line("int64_t bj = -1;");
    open("for (int64_t j = " + first + "; j < " + std::to_string(t_.length) + "; j += " + step + ")");
    line("const " + v_ + " v = (" + v_ + ")" + emitc::decode("x[j * " + inner_ + "]", x_dtype(k_)) + ";");
    line("if ((pj < 0 || before(pv, pj, v, j)) && (bj < 0 || before(v, j, bv, bj))) bv = v, bj = j;");
    close();
  }

  // Takes (ov, oj), another lane's best, where it comes first.
  void merge(const std::string& ov, const std::string& oj) {
    line("if (" + oj + " >= 0 && (bj < 0 || before(" + ov + ", " + oj + ", bv, bj))) bv = " + ov + ", bj = " + oj +
         ";");
  }

  // Stores selection s of row (o, i), then makes it the previous one.
  void store_selection() {
    for (const kir::Instr* st : stores(k_)) {
      const std::string at = "o * " + expr(st->index.strides[0]) + " + s * " + expr(st->index.strides[1]) +
                              " + i * " + expr(st->index.strides[2]);
      const bool value = k_.body[static_cast<size_t>(st->args[0])].op == kir::Op::TopKValue;
      line("p" + std::to_string(st->buffer) + "[" + at + "] = " + (value ? "x[bj * " + inner_ + "]" : "bj") + ";");
    }
  }

  const kir::Kernel& k_;
  const kir::TopKDesc& t_;
  const std::string v_, inner_;
};

class CudaTopK : public TopKWriter {
 public:
  CudaTopK(const kir::Kernel& k, const KernelConfig& c)
      : TopKWriter(k), block_(c.block), team_(c.block / c.rows_per_block), rows_(c.rows_per_block) {}

  std::string print() {
    out_ = emitc::cuda_signature(k_, false, block_);
    line(before_lambda(k_));
    const std::string team = std::to_string(team_);
    line("const int64_t row = (int64_t)blockIdx.x * " + std::to_string(rows_) + " + threadIdx.x / " + team + ";");
    line("const int lane = threadIdx.x % " + team + ";");
    line("const bool live = row < " + expr(k_.domain[0]) + " * " + inner_ + ";");
    line("const int64_t o = row / " + inner_ + ", i = row % " + inner_ + ";");
    row_start();
    const int warps = team_ / 32;
    if (warps > 1) {
      line("__shared__ " + v_ + " team_v[" + std::to_string(block_ / 32) + "];");
      line("__shared__ int64_t team_j[" + std::to_string(block_ / 32) + "];");
    }
    open("for (int64_t s = 0; s < " + k_.domain[1].str() + "; ++s)");
    // Rows past the end scan nothing but still meet the team's barriers.
    scan("live ? lane : " + std::to_string(t_.length), team);
    open("for (int m = 16; m > 0; m >>= 1)");
    line("const " + v_ + " ov = __shfl_xor_sync(0xffffffffu, bv, m);");
    line("const int64_t oj = __shfl_xor_sync(0xffffffffu, bj, m);");
    merge("ov", "oj");
    close();
    if (warps > 1) {
      open("if (threadIdx.x % 32 == 0)");
      line("team_v[threadIdx.x / 32] = bv;");
      line("team_j[threadIdx.x / 32] = bj;");
      close();
      line("__syncthreads();");
      const std::string first = "threadIdx.x / " + team + " * " + std::to_string(warps);
      open("for (int w = " + first + "; w < " + first + " + " + std::to_string(warps) + "; ++w)");
      merge("team_v[w]", "team_j[w]");
      close();
      line("__syncthreads();");
    }
    open("if (live && lane == 0)");
    store_selection();
    close();
    line("pv = bv;");
    line("pj = bj;");
    close();
    out_ += "}\n";
    return out_;
  }

 private:
  int block_, team_, rows_;
};

class HostTopK : public TopKWriter {
 public:
  explicit HostTopK(const kir::Kernel& k) : TopKWriter(k) {}

  std::string print() {
    out_ = emitc::host_signature(k_);
    line(before_lambda(k_));
    open("for (int64_t o = 0; o < " + expr(k_.domain[0]) + "; ++o)");
    open("for (int64_t i = 0; i < " + inner_ + "; ++i)");
    row_start();
    open("for (int64_t s = 0; s < " + k_.domain[1].str() + "; ++s)");
    scan("0", "1");
    store_selection();
    line("pv = bv;");
    line("pj = bj;");
    close();
    close();
    close();
    out_ += "}\n";
    return out_;
  }
};

std::string topk_refusal(const kir::Kernel& k, const KernelConfig& c) {
  TCC_CHECK(k.kind == kir::Kind::TopK) << k.name << " is not a topk kernel";
  std::string why = block_config_refusal(c, "topk kernels", kMaxThreads, true);
  if (!why.empty()) return why;
  if (c.rows_per_block < 1 || c.rows_per_block > kMaxRows || c.block % (32 * c.rows_per_block) != 0)
    return "rows per block " + std::to_string(c.rows_per_block) + " does not give each row whole warps of block " +
           std::to_string(c.block) + " (at most " + std::to_string(kMaxRows) + " rows)";
  return "";
}

std::string emit_topk_cuda(const kir::Kernel& k, const KernelConfig& c) {
  std::string refusal = topk_refusal(k, c);
  TCC_CHECK(refusal.empty()) << k.name << ": " << refusal;
  return CudaTopK(k, c).print();
}

std::string emit_topk_host(const kir::Kernel& k) { return HostTopK(k).print(); }

KernelLaunch topk_launch(const kir::Kernel& k, const KernelConfig& c) {
  const SymExpr per_block = SymExpr::constant(c.rows_per_block);
  KernelLaunch l;
  l.grid[0] = (k.domain[0] * k.domain[2] + per_block - SymExpr::constant(1)).floordiv(per_block);
  l.block[0] = c.block;
  return l;
}

KernelConfig topk_default_config(const kir::Kernel& k) {
  return desc(k).length <= kTopKWarpRow ? block_config(128, 4) : block_config(256);
}

std::vector<KernelConfig> topk_configs(const kir::Kernel& k) {
  std::vector<int> rows;
  for (int r = 1; r <= kMaxRows; r *= 2) rows.push_back(r);
  return block_configs(64, 512, rows, [&](const KernelConfig& c) { return topk_refusal(k, c); });
}

// TopK compares and copies its input's elements exactly, in their own dtype.
std::string topk_precision(const kir::Kernel& k, const KernelConfig&) {
  return std::string(dtype_name(k.buffers.front().dtype));
}

std::string topk_schedule(const kir::Kernel& k, const KernelConfig& c) {
  TCC_CHECK(k.kind == kir::Kind::TopK) << k.name << " is not a topk kernel";
  const int team = c.block / c.rows_per_block;
  return "block " + std::to_string(c.block) + ", " + std::to_string(c.rows_per_block) +
         (c.rows_per_block == 1 ? " row" : " rows") + ", " +
         (team == 32 ? std::string("a warp") : std::to_string(team) + " threads") + " a row";
}

std::string topk_config_text(const KernelConfig& c) {
  return block_config_text(c) + " rows=" + std::to_string(c.rows_per_block);
}

}  // namespace

const TemplateKernel kTopKTemplate = {
    .default_config = topk_default_config,
    .refusal = topk_refusal,
    .configs = topk_configs,
    .emit_cuda = emit_topk_cuda,
    .emit_host = emit_topk_host,
    .launch = topk_launch,
    .precision = topk_precision,
    .schedule = topk_schedule,
    .config_text = topk_config_text,
};

}  // namespace tcc
