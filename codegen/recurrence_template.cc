#include "codegen/recurrence_template.h"

#include <algorithm>

#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

constexpr int kMaxThreads = 1024;

const kir::RecurrenceDesc& desc(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::Recurrence && k.recurrence.has_value()) << k.name << " is not a recurrence kernel";
  return *k.recurrence;
}

std::string expr(const SymExpr& e) { return "(" + emitc::size_expr(e) + ")"; }
std::string num(int64_t v) { return std::to_string(v); }
std::string buf(int b) { return "p" + std::to_string(b); }

// The lines both targets share: the steps of one (direction d, batch row b)
// by threads `tid` of `threads`, `sync` between the phases.
class RecurrenceWriter : public emitc::CodeWriter {
 protected:
  RecurrenceWriter(const kir::Kernel& k, std::string sync)
      : k_(k),
        r_(desc(k)),
        t_(emitc::compute_type(k.buffers[static_cast<size_t>(desc(k).xw)].dtype)),
        sync_(std::move(sync)) {}

  // act<a>(x): activation a of the body, a lambda over its scalar instructions.
  void activations() {
    std::vector<bool> none(k_.body.size(), false);
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const kir::Instr& result = k_.body[i];
      if (result.op != kir::Op::RecurrenceResult) continue;
      open("auto act" + std::to_string(result.axis) + " = [&](" + t_ + " x) -> " + t_);
      const std::vector<bool> needed = emitc::closure(k_, {result.args[0]}, none);
      for (size_t j = 0; j < i; ++j) {
        if (!needed[j]) continue;
        if (k_.body[j].op == kir::Op::RecurrenceArg) line("const " + t_ + " v" + std::to_string(j) + " = x;");
        else out_ += indent() + emitc::define(k_, static_cast<int>(j));
      }
      line("return v" + std::to_string(result.args[0]) + ";");
      depth_--;
      line("};");
    }
    if (r_.clip > 0) {
      const std::string c = emitc::literal(r_.clip, DType::F64);
      line("auto clip = [](" + t_ + " v) -> " + t_ + " { return v < -" + c + " ? -" + c + " : v > " + c + " ? " + c +
           " : v; };");
    } else {
      line("auto clip = [](" + t_ + " v) { return v; };");
    }
  }

  // The barrier between a step's phases (none on the host).
  void sync() {
    if (!sync_.empty()) line(sync_);
  }

  // A loop of this thread's units j over [0, n).
  void units(const std::string& n) { open("for (int64_t j = tid; j < " + n + "; j += threads)"); }

  // s[j] = Rb[from + j] + R[from + j] . v for j in [0, rows).
  void sums(const std::string& v, int64_t from, int64_t rows) {
    units(num(rows));
    line(t_ + " acc = " + (r_.b >= 0 ? "rb[" + num(from) + " + j]" : std::string("0")) + ";");
    line("const " + t_ + "* w = rr + (" + num(from) + " + j) * " + num(r_.hidden) + ";");
    line("for (int64_t q = 0; q < " + num(r_.hidden) + "; ++q) acc += w[q] * " + v + "[q];");
    line("s[" + num(from) + " + j] = acc;");
    close();
    sync();
  }

  // Gate g's argument at unit j: the projection's and the sums' (plus `extra`), clipped.
  std::string gate(int64_t g, const std::string& extra = "") const {
    const std::string at = num(g * r_.hidden) + " + j";
    return "clip(x[" + at + "] + s[" + at + "]" + extra + ")";
  }
  std::string act(int64_t f, const std::string& arg) const {
    return "act" + std::to_string(f) + "_d(" + arg + ")";
  }

  // The row's steps; d, b and tid are defined, h, c, s and rh are arrays of the states and sums.
  void row() {
    const int64_t H = r_.hidden, G = r_.gates() * H, D = r_.directions;
    const std::string B = expr(r_.batch), S = expr(r_.seq);
    const bool lstm = r_.cell == RecurrentCell::Lstm, gru = r_.cell == RecurrentCell::Gru;
    line("const bool backward = " + std::string(D == 2 ? "d == 1" : r_.reverse ? "true" : "false") + ";");
    line("int64_t len = " + (r_.lens >= 0 ? "(int64_t)" + buf(r_.lens) + "[b]" : S) + ";");
    line("len = len < 0 ? 0 : len > " + S + " ? " + S + " : len;");
    line("const " + t_ + "* rr = " + buf(r_.r) + " + d * " + num(G * H) + ";");
    if (r_.b >= 0) line("const " + t_ + "* rb = " + buf(r_.b) + " + d * " + num(2 * G) + " + " + num(G) + ";");
    if (r_.p >= 0) line("const " + t_ + "* pp = " + buf(r_.p) + " + d * " + num(3 * H) + ";");
    line("const int64_t state = (d * " + B + " + b) * " + num(H) + ";");
    // Activation f of this direction.
    for (int64_t f = 0; f < r_.functions(); ++f) {
      const std::string forward = "act" + std::to_string(f) + "(v)";
      const std::string pick =
          D == 2 ? "(d == 0 ? " + forward + " : act" + std::to_string(r_.functions() + f) + "(v))" : forward;
      line("auto act" + std::to_string(f) + "_d = [&](" + t_ + " v) { return " + pick + "; };");
    }
    units(num(H));
    line("h[j] = " + (r_.init_h >= 0 ? buf(r_.init_h) + "[state + j]" : std::string("0")) + ";");
    if (lstm) line("c[j] = " + (r_.init_c >= 0 ? buf(r_.init_c) + "[state + j]" : std::string("0")) + ";");
    close();
    sync();
    open("for (int64_t k = 0; k < len; ++k)");
    line("const int64_t t = backward ? len - 1 - k : k;");
    line("const " + t_ + "* x = " + buf(r_.xw) + " + (t * " + B + " + b) * " + num(D * G) + " + d * " + num(G) +
         ";");
    if (gru && !r_.linear_before_reset) {
      sums("h", 0, 2 * H);
      units(num(H));
      line("const " + t_ + " r = " + act(0, gate(1)) + ";");
      line("s[j] = " + act(0, gate(0)) + ";");
      line("rh[j] = r * h[j];");
      close();
      sync();
      units(num(H));
      line(t_ + " acc = " + (r_.b >= 0 ? "rb[" + num(2 * H) + " + j]" : std::string("0")) + ";");
      line("const " + t_ + "* w = rr + (" + num(2 * H) + " + j) * " + num(H) + ";");
      line("for (int64_t q = 0; q < " + num(H) + "; ++q) acc += w[q] * rh[q];");
      line("const " + t_ + " cand = " + act(1, "clip(x[" + num(2 * H) + " + j] + acc)") + ";");
      line("const " + t_ + " hn = (1 - s[j]) * cand + s[j] * h[j];");
    } else {
      sums("h", 0, G);
      units(num(H));
      if (r_.cell == RecurrentCell::Rnn) {
        line("const " + t_ + " hn = " + act(0, gate(0)) + ";");
      } else if (gru) {
        line("const " + t_ + " z = " + act(0, gate(0)) + ";");
        line("const " + t_ + " r = " + act(0, gate(1)) + ";");
        line("const " + t_ + " cand = " + act(1, "clip(x[" + num(2 * H) + " + j] + r * s[" + num(2 * H) + " + j])") +
             ";");
        line("const " + t_ + " hn = (1 - z) * cand + z * h[j];");
      } else {
        auto peephole = [&](int64_t g, const std::string& state) {
          return r_.p >= 0 ? " + pp[" + num(g * H) + " + j] * " + state : std::string();
        };
        line("const " + t_ + " i = " + act(0, gate(0, peephole(0, "c[j]"))) + ";");
        line("const " + t_ + " f = " + (r_.input_forget ? "1 - i" : act(0, gate(2, peephole(2, "c[j]")))) + ";");
        line("const " + t_ + " cn = f * c[j] + i * " + act(1, gate(3)) + ";");
        line("const " + t_ + " o = " + act(0, gate(1, peephole(1, "cn"))) + ";");
        line("const " + t_ + " hn = o * " + act(2, "clip(cn)") + ";");
        line("c[j] = cn;");
      }
    }
    line("h[j] = hn;");
    if (r_.y >= 0) line(y_element() + " = hn;");
    close();
    sync();
    close();
    // The final states (zero for a length of 0) and Y's steps past the length.
    units(num(H));
    if (r_.y_h >= 0) line(buf(r_.y_h) + "[state + j] = len > 0 ? h[j] : 0;");
    if (r_.y_c >= 0) line(buf(r_.y_c) + "[state + j] = len > 0 ? c[j] : 0;");
    if (r_.y >= 0) {
      open("for (int64_t t = len; t < " + S + "; ++t)");
      line(y_element() + " = 0;");
      close();
    }
    close();
  }

  // Y's element of step t, unit j: Y is [seq, directions, batch, hidden].
  std::string y_element() const {
    return buf(r_.y) + "[((t * " + num(r_.directions) + " + d) * " + expr(r_.batch) + " + b) * " + num(r_.hidden) +
           " + j]";
  }

  // The states and sums: `storage` arrays of the compute type.
  void arrays(const std::string& storage) {
    const int64_t H = desc(k_).hidden;
    line(storage + t_ + " h[" + num(H) + "];");
    if (r_.cell == RecurrentCell::Lstm) line(storage + t_ + " c[" + num(H) + "];");
    line(storage + t_ + " s[" + num(r_.gates() * H) + "];");
    if (r_.cell == RecurrentCell::Gru && !r_.linear_before_reset) line(storage + t_ + " rh[" + num(H) + "];");
  }

  const kir::Kernel& k_;
  const kir::RecurrenceDesc& r_;
  const std::string t_, sync_;
};

class CudaRecurrence : public RecurrenceWriter {
 public:
  CudaRecurrence(const kir::Kernel& k, const KernelConfig& c)
      : RecurrenceWriter(k, "__syncthreads();"), block_(c.block) {}

  std::string print() {
    out_ = emitc::cuda_signature(k_, false, block_);
    activations();
    arrays("__shared__ ");
    line("const int64_t d = blockIdx.x / " + expr(r_.batch) + ", b = blockIdx.x % " + expr(r_.batch) + ";");
    line("const int64_t tid = threadIdx.x, threads = " + std::to_string(block_) + ";");
    row();
    out_ += "}\n";
    return out_;
  }

 private:
  int block_;
};

class HostRecurrence : public RecurrenceWriter {
 public:
  explicit HostRecurrence(const kir::Kernel& k) : RecurrenceWriter(k, "") {}

  std::string print() {
    out_ = emitc::host_signature(k_);
    activations();
    line("const int64_t tid = 0, threads = 1;");
    open("for (int64_t d = 0; d < " + num(r_.directions) + "; ++d)");
    open("for (int64_t b = 0; b < " + expr(r_.batch) + "; ++b)");
    arrays("");
    row();
    close();
    close();
    out_ += "}\n";
    return out_;
  }
};

std::string recurrence_refusal(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  return block_config_refusal(c, "recurrence kernels", kMaxThreads);
}

std::string emit_recurrence_cuda(const kir::Kernel& k, const KernelConfig& c) {
  std::string refusal = recurrence_refusal(k, c);
  TCC_CHECK(refusal.empty()) << k.name << ": " << refusal;
  return CudaRecurrence(k, c).print();
}

std::string emit_recurrence_host(const kir::Kernel& k) { return HostRecurrence(k).print(); }

KernelLaunch recurrence_launch(const kir::Kernel& k, const KernelConfig& c) {
  KernelLaunch l;
  l.grid[0] = SymExpr::constant(desc(k).directions) * desc(k).batch;
  l.block[0] = c.block;
  return l;
}

KernelConfig recurrence_default_config(const kir::Kernel& k) {
  const int64_t rows = desc(k).gates() * desc(k).hidden;
  return block_config(static_cast<int>(std::clamp<int64_t>((rows + 31) / 32 * 32, 32, 256)));
}

std::vector<KernelConfig> recurrence_configs(const kir::Kernel& k) {
  return block_configs(32, 512, {1}, [&](const KernelConfig& c) { return recurrence_refusal(k, c); });
}

// The recurrence computes in its operands' f32 or f64, on the CUDA cores.
std::string recurrence_precision(const kir::Kernel& k, const KernelConfig&) {
  return std::string(dtype_name(k.buffers.front().dtype));
}

std::string recurrence_schedule(const kir::Kernel& k, const KernelConfig& c) {
  desc(k);
  return "block " + std::to_string(c.block) + " per direction and row";
}

}  // namespace

const TemplateKernel kRecurrenceTemplate = {
    .default_config = recurrence_default_config,
    .refusal = recurrence_refusal,
    .configs = recurrence_configs,
    .emit_cuda = emit_recurrence_cuda,
    .emit_host = emit_recurrence_host,
    .launch = recurrence_launch,
    .precision = recurrence_precision,
    .schedule = recurrence_schedule,
    .config_text = block_config_text,
};

}  // namespace tcc
