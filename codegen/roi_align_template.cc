#include "codegen/roi_align_template.h"

#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

constexpr int kMaxThreads = 1024;

const kir::RoiAlignDesc& desc(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::RoiAlign && k.roi_align.has_value()) << k.name << " is not a roi_align kernel";
  return *k.roi_align;
}

std::string expr(const SymExpr& e) { return "(" + emitc::size_expr(e) + ")"; }
std::string buf(int b) { return "p" + std::to_string(b); }

// The lines both targets share: the helpers, then output element `e`.
class RoiAlignWriter : public emitc::CodeWriter {
 protected:
  explicit RoiAlignWriter(const kir::Kernel& k)
      : k_(k), d_(desc(k)), image_(k.buffers[static_cast<size_t>(d_.x)].shape) {}

  // X's plane sizes and the lambdas: std::min's (an adaptive grid's bound) and std::max's choices,
  // `product` multiplying a and b unfused, and roi_point, a sample's taps
  // (flat offsets in the plane) and weights, all 0 outside.
  void helpers(const std::string& product) {
    line("const int64_t h = " + expr(image_[2]) + ", w = " + expr(image_[3]) + ";");
    if (d_.sampling_ratio == 0) line("auto lo = [](double a, double b) { return b < a ? b : a; };");
    line("auto hi = [](double a, double b) { return a < b ? b : a; };");
    line("auto mul = [](double a, double b) { return " + product + "; };");
    open("auto point = [&](double y, double x, int64_t* at, double* wt)");
    open("for (int t = 0; t < 4; ++t)");
    line("at[t] = 0;");
    line("wt[t] = 0;");
    close();
    line("if (!(y >= -1.0 && y <= (double)h && x >= -1.0 && x <= (double)w)) return;");
    line("y = hi(y, 0.0);");
    line("x = hi(x, 0.0);");
    line("int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1 = y0 + 1, x1 = x0 + 1;");
    line("if (y0 >= h - 1) y = (double)(y0 = y1 = h - 1);");
    line("if (x0 >= w - 1) x = (double)(x0 = x1 = w - 1);");
    line("const double ly = y - (double)y0, lx = x - (double)x0;");
    line("at[0] = y0 * w + x0;");
    line("at[1] = y0 * w + x1;");
    line("at[2] = y1 * w + x0;");
    line("at[3] = y1 * w + x1;");
    line("wt[0] = mul(1 - ly, 1 - lx);");
    line("wt[1] = mul(1 - ly, lx);");
    line("wt[2] = mul(ly, 1 - lx);");
    line("wt[3] = mul(ly, lx);");
    depth_--;
    line("};");
  }

  // Output element e: its region's box and samples, then its bin's value.
  void element() {
    const SymExpr &height = k_.domain[2], &width = k_.domain[3];
    const std::string type = emitc::storage_type(k_.buffers[static_cast<size_t>(d_.x)].dtype);
    line("const int64_t pw = e % " + expr(width) + ", ph = e / " + expr(width) + " % " + expr(height) + ";");
    line("const int64_t c = e / " + expr(width * height) + " % " + expr(image_[1]) + ", r = e / " +
         expr(width * height * image_[1]) + ";");
    line("const " + type + "* box = " + buf(d_.rois) + " + r * 4;");
    line("const int64_t b = " + buf(d_.batch_indices) + "[r];");
    line(d_.max ? "double v = 0;" : "double v = 0, count = 1;");
    open("if (b >= 0 && b < " + expr(image_[0]) + ")");
    const std::string scale = emitc::literal(d_.spatial_scale, DType::F64), shift = d_.half_pixel ? " - 0.5" : "";
    line("const double x0 = mul((double)box[0], " + scale + ")" + shift + ", y0 = mul((double)box[1], " + scale + ")" +
         shift + ";");
    line("double rw = mul((double)box[2], " + scale + ")" + shift + " - x0;");
    line("double rh = mul((double)box[3], " + scale + ")" + shift + " - y0;");
    if (!d_.half_pixel) {
      line("rw = hi(rw, 1.0);");
      line("rh = hi(rh, 1.0);");
    }
    line("const double bin_h = rh / (double)" + expr(height) + ", bin_w = rw / (double)" + expr(width) + ";");
    if (d_.sampling_ratio > 0) {
      line("const int64_t gh = " + std::to_string(d_.sampling_ratio) + ", gw = gh;");
    } else {
      // ceil(bin size), bounded so that a huge region cannot ask for billions of samples (and a NaN one asks for none).
      open("auto grid = [&](double bin) -> int64_t");
      line("const double n = ceil(bin);");
      line("return n > 0 ? (int64_t)lo(n, 10000.0) : 0;");
      depth_--;
      line("};");
      line("const int64_t gh = grid(bin_h), gw = grid(bin_w);");
    }
    if (!d_.max) line("count = (double)(gh * gw > 1 ? gh * gw : 1);");
    line("const " + type + "* plane = " + buf(d_.x) + " + (b * " + expr(image_[1]) + " + c) * h * w;");
    line("int64_t at[4];");
    line("double wt[4];");
    open("for (int64_t iy = 0; iy < gh; ++iy)");
    open("for (int64_t ix = 0; ix < gw; ++ix)");
    line("point(y0 + mul((double)ph, bin_h) + mul((double)iy + 0.5, bin_h) / (double)gh,");
    line("      x0 + mul((double)pw, bin_w) + mul((double)ix + 0.5, bin_w) / (double)gw, at, wt);");
    if (d_.max) {
      line("double m = mul(wt[0], (double)plane[at[0]]);");
      line("for (int t = 1; t < 4; ++t) m = hi(m, mul(wt[t], (double)plane[at[t]]));");
      line("v = iy == 0 && ix == 0 ? m : hi(v, m);");
    } else {
      line("for (int t = 0; t < 4; ++t) v += mul(wt[t], (double)plane[at[t]]);");
    }
    close();
    close();
    close();
    line(buf(d_.y) + "[e] = (" + type + ")(" + (d_.max ? "v" : "v / count") + ");");
  }

  const kir::Kernel& k_;
  const kir::RoiAlignDesc& d_;
  const std::vector<SymExpr>& image_;  // X's [N, C, H, W]
};

class CudaRoiAlign : public RoiAlignWriter {
 public:
  CudaRoiAlign(const kir::Kernel& k, const KernelConfig& c) : RoiAlignWriter(k), block_(c.block) {}

  std::string print() {
    out_ = emitc::cuda_signature(k_, false, block_);
    line("const int64_t e = (int64_t)blockIdx.x * " + std::to_string(block_) + " + threadIdx.x;");
    line("if (e >= " + expr(kir::domain_size(k_)) + ") return;");
    helpers("__dmul_rn(a, b)");
    element();
    out_ += "}\n";
    return out_;
  }

 private:
  int block_;
};

class HostRoiAlign : public RoiAlignWriter {
 public:
  explicit HostRoiAlign(const kir::Kernel& k) : RoiAlignWriter(k) {}

  std::string print() {
    out_ = emitc::host_signature(k_);
    helpers("a * b");
    open("for (int64_t e = 0; e < " + expr(kir::domain_size(k_)) + "; ++e)");
    element();
    close();
    out_ += "}\n";
    return out_;
  }
};

std::string roi_align_refusal(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  return block_config_refusal(c, "roi_align kernels", kMaxThreads);
}

std::string emit_roi_align_cuda(const kir::Kernel& k, const KernelConfig& c) {
  std::string refusal = roi_align_refusal(k, c);
  TCC_CHECK(refusal.empty()) << k.name << ": " << refusal;
  return CudaRoiAlign(k, c).print();
}

std::string emit_roi_align_host(const kir::Kernel& k) { return HostRoiAlign(k).print(); }

KernelLaunch roi_align_launch(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  KernelLaunch l;
  l.grid[0] = (kir::domain_size(k) + SymExpr::constant(c.block - 1)).floordiv(SymExpr::constant(c.block));
  l.block[0] = c.block;
  return l;
}

KernelConfig roi_align_default_config(const kir::Kernel& k) {
  desc(k);
  return block_config(256);
}

std::vector<KernelConfig> roi_align_configs(const kir::Kernel& k) {
  return block_configs(64, 512, {1}, [&](const KernelConfig& c) { return roi_align_refusal(k, c); });
}

// RoiAlign's samples and their weights are f64, as the interpreter's.
std::string roi_align_precision(const kir::Kernel&, const KernelConfig&) { return "f64"; }

std::string roi_align_schedule(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  return "block " + std::to_string(c.block) + " an element";
}

}  // namespace

const TemplateKernel kRoiAlignTemplate = {
    .default_config = roi_align_default_config,
    .refusal = roi_align_refusal,
    .configs = roi_align_configs,
    .emit_cuda = emit_roi_align_cuda,
    .emit_host = emit_roi_align_host,
    .launch = roi_align_launch,
    .precision = roi_align_precision,
    .schedule = roi_align_schedule,
    .config_text = block_config_text,
};

}  // namespace tcc
