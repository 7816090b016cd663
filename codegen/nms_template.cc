#include "codegen/nms_template.h"

#include <cmath>

#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

constexpr int kMaxThreads = 1024;

const kir::NmsDesc& desc(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::Nms && k.nms.has_value()) << k.name << " is not an nms kernel";
  return *k.nms;
}

std::string expr(const SymExpr& e) { return "(" + emitc::size_expr(e) + ")"; }
std::string buf(int b) { return "p" + std::to_string(b); }

// The workspace words of one (batch, class): the sorted indices, the mask's
// rows and the removed boxes.
SymExpr row_words(const kir::NmsDesc& d) {
  const SymExpr words = (d.boxes + SymExpr::constant(63)).floordiv(SymExpr::constant(64));
  return d.boxes + d.boxes * words + words;
}

// The lines both targets share: row r's phases by threads `tid` of
// `threads`, `sync` between them, its scan by lanes `lane` of `lanes`.
class NmsWriter : public emitc::CodeWriter {
 protected:
  NmsWriter(const kir::Kernel& k, std::string sync) : k_(k), d_(desc(k)), sync_(std::move(sync)) {}

  // The box count, the words of a mask row and the scalars.
  void sizes() {
    line("const int64_t n = " + expr(d_.boxes) + ", words = (n + 63) / 64;");
    line("const double iou = " + (d_.iou_threshold >= 0 ? "(double)" + buf(d_.iou_threshold) + "[0]" : "0.0") + ";");
    line("const int64_t limit = " +
         (d_.max_output >= 0 ? buf(d_.max_output) + "[0] > 0 ? " + buf(d_.max_output) + "[0] : 0" : "0") + ";");
  }

  // The lambdas every phase calls on row r: a box's score (NaN as -inf) and
  // whether it passes score_threshold, its extents, and whether kept box i
  // suppresses box j (eval_nms's read_box and overlaps, their min and max as
  // std::min's and std::max's). `product` multiplies a and b, unfused.
  void helpers(const std::string& product) {
    open("auto score = [&](int64_t i) -> double");
    line("const double s = (double)sc[i];");
    line("return s != s ? " + emitc::literal(-INFINITY, DType::F64) + " : s;");
    depth_--;
    line("};");
    if (d_.score_threshold >= 0) {
      line("const double score_min = (double)" + buf(d_.score_threshold) + "[0];");
      line("auto valid = [&](int64_t i) { return score(i) > score_min; };");
    } else {
      line("auto valid = [](int64_t) { return true; };");
    }
    line("auto lo = [](double a, double b) { return b < a ? b : a; };");
    line("auto hi = [](double a, double b) { return a < b ? b : a; };");
    line("auto mul = [](double a, double b) { return " + product + "; };");
    // x0, x1, y0, y1 of box i: [x_center, y_center, width, height], or [y1, x1, y2, x2] at any diagonal.
    open("auto extents = [&](int64_t i, double* e)");
    line("const double a = bx[i * 4], b = bx[i * 4 + 1], c = bx[i * 4 + 2], d = bx[i * 4 + 3];");
    if (d_.center) {
      line("e[0] = a - c / 2;");
      line("e[1] = a + c / 2;");
      line("e[2] = b - d / 2;");
      line("e[3] = b + d / 2;");
    } else {
      line("e[0] = lo(b, d);");
      line("e[1] = hi(b, d);");
      line("e[2] = lo(a, c);");
      line("e[3] = hi(a, c);");
    }
    depth_--;
    line("};");
    open("auto suppresses = [&](int64_t i, int64_t j) -> bool");
    line("double p[4], q[4];");
    line("extents(j, p);");
    line("extents(i, q);");
    line("const double w = lo(p[1], q[1]) - hi(p[0], q[0]), h = lo(p[3], q[3]) - hi(p[2], q[2]);");
    line("if (w <= 0 || h <= 0) return false;");
    line("const double pa = mul(p[1] - p[0], p[3] - p[2]), qa = mul(q[1] - q[0], q[3] - q[2]);");
    line("const double inter = mul(w, h), uni = pa + qa - inter;");
    line("if (pa <= 0 || qa <= 0 || uni <= 0) return false;");
    line("return inter / uni > iou;");
    depth_--;
    line("};");
  }

  // Row r's inputs and its workspace `ws` (words of uint64_t).
  void row_start(const std::string& ws) {
    line("const float* bx = " + buf(d_.box_data) + " + r / " + expr(k_.domain[1]) + " * n * 4;");
    line("const float* sc = " + buf(d_.scores) + " + r * n;");
    line("uint64_t* sorted = " + ws + ";");
    line("uint64_t* mask = sorted + n;");
    line("uint64_t* removed = mask + n * words;");
  }

  // Phases 1 and 2: the boxes above the threshold in order, then the mask's rows.
  void order_and_mask() {
    line("int64_t m = 0;");
    line("for (int64_t j = 0; j < n; ++j) m += valid(j);");
    open("for (int64_t i = tid; i < n; i += threads)");
    line("if (!valid(i)) continue;");
    line("const double s = score(i);");
    line("int64_t rank = 0;");
    open("for (int64_t j = 0; j < n; ++j)");
    line("if (!valid(j)) continue;");
    line("const double t = score(j);");
    line("rank += t > s || (t == s && j < i);");
    close();
    line("sorted[rank] = (uint64_t)i;");
    close();
    if (!sync_.empty()) line(sync_);
    open("for (int64_t q = tid; q < m * words; q += threads)");
    line("const int64_t i = q / words, w = q % words;");
    line("uint64_t word = 0;");
    open("for (int64_t j = w * 64 > i + 1 ? w * 64 : i + 1; j < w * 64 + 64 && j < m; ++j)");
    line("if (suppresses((int64_t)sorted[i], (int64_t)sorted[j])) word |= (uint64_t)1 << (j - w * 64);");
    close();
    line("mask[q] = word;");
    close();
    if (!sync_.empty()) line(sync_);
  }

  // Phase 3 by lanes `lane` of `lanes`; `removed_word` reads the removed mask's word w.
  void scan(const std::string& lanes, const std::string& removed_word) {
    line("int64_t* sel = " + buf(d_.selected) + " + r * n;");
    line("for (int64_t w = lane; w < words; w += " + lanes + ") removed[w] = 0;");
    line("int64_t count = 0;");
    open("for (int64_t i = 0; i < m && count < limit; ++i)");
    line("const int64_t w = i / 64;");
    line("const uint64_t word = " + removed_word + ";");
    line("if ((word >> (i % 64)) & 1) continue;");
    line("if (lane == 0) sel[count] = (int64_t)sorted[i];");
    line("++count;");
    line("for (int64_t v = lane; v < words; v += " + lanes + ") removed[v] |= mask[i * words + v];");
    close();
    line("for (int64_t p = count + lane; p < n; p += " + lanes + ") sel[p] = -1;");
    line("if (lane == 0) " + buf(d_.count) + "[r] = count;");
  }

  const kir::Kernel& k_;
  const kir::NmsDesc& d_;
  const std::string sync_;
};

class CudaNms : public NmsWriter {
 public:
  CudaNms(const kir::Kernel& k, const KernelConfig& c) : NmsWriter(k, "__syncthreads();"), block_(c.block) {}

  std::string print() {
    out_ = emitc::cuda_signature(k_, true, block_);
    line("const int64_t r = blockIdx.x;");
    line("if (r >= " + expr(k_.domain[0] * k_.domain[1]) + ") return;");
    line("const int64_t tid = threadIdx.x, threads = " + std::to_string(block_) + ";");
    sizes();
    row_start("(uint64_t*)ws + r * " + expr(row_words(d_)));
    helpers("__dmul_rn(a, b)");
    order_and_mask();
    open("if (threadIdx.x < 32)");
    line("const int64_t lane = threadIdx.x;");
    scan("32",
         "__shfl_sync(0xffffffffu, (unsigned long long)(w % 32 == lane ? removed[w] : 0), (int)(w % 32))");
    close();
    out_ += "}\n";
    return out_;
  }

 private:
  int block_;
};

class HostNms : public NmsWriter {
 public:
  explicit HostNms(const kir::Kernel& k) : NmsWriter(k, "") {}

  std::string print() {
    out_ = emitc::host_signature(k_);
    line("const int64_t tid = 0, threads = 1, lane = 0;");
    sizes();
    line("uint64_t* ws = new uint64_t[" + emitc::size_expr(row_words(d_)) + "];");
    open("for (int64_t r = 0; r < " + expr(k_.domain[0] * k_.domain[1]) + "; ++r)");
    row_start("ws");
    helpers("a * b");
    order_and_mask();
    scan("1", "removed[w]");
    close();
    line("delete[] ws;");
    out_ += "}\n";
    return out_;
  }
};

std::string nms_refusal(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  return block_config_refusal(c, "nms kernels", kMaxThreads);
}

std::string emit_nms_cuda(const kir::Kernel& k, const KernelConfig& c) {
  std::string refusal = nms_refusal(k, c);
  TCC_CHECK(refusal.empty()) << k.name << ": " << refusal;
  return CudaNms(k, c).print();
}

std::string emit_nms_host(const kir::Kernel& k) { return HostNms(k).print(); }

KernelLaunch nms_launch(const kir::Kernel& k, const KernelConfig& c) {
  KernelLaunch l;
  l.grid[0] = k.domain[0] * k.domain[1];
  l.block[0] = c.block;
  // One word more, so that no batch or box count leaves it empty (the runtime refuses 0 bytes).
  l.workspace_bytes = (k.domain[0] * k.domain[1] * row_words(desc(k)) + SymExpr::constant(1)) * SymExpr::constant(8);
  return l;
}

KernelConfig nms_default_config(const kir::Kernel& k) {
  desc(k);
  return block_config(256);
}

std::vector<KernelConfig> nms_configs(const kir::Kernel& k) {
  return block_configs(64, 512, {1}, [&](const KernelConfig& c) { return nms_refusal(k, c); });
}

// NMS reads f32 boxes and scores and computes in f64, as the interpreter.
std::string nms_precision(const kir::Kernel&, const KernelConfig&) { return "f64"; }

std::string nms_schedule(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  return "block " + std::to_string(c.block) + " a class";
}

}  // namespace

const TemplateKernel kNmsTemplate = {
    .default_config = nms_default_config,
    .refusal = nms_refusal,
    .configs = nms_configs,
    .emit_cuda = emit_nms_cuda,
    .emit_host = emit_nms_host,
    .launch = nms_launch,
    .precision = nms_precision,
    .schedule = nms_schedule,
    .config_text = block_config_text,
};

}  // namespace tcc
