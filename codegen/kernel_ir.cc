#include "codegen/kernel_ir.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "src/diag/errors.h"
#include "src/ir/text_cursor.h"

namespace tcc::kir {

namespace {

// The shortest text that reads back to the same double.
std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string join_exprs(const std::vector<SymExpr>& es, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) out += (i == begin ? "" : ", ") + es[i].str();
  return out;
}

SymExpr product(const std::vector<SymExpr>& es, size_t begin, size_t end) {
  SymExpr p = SymExpr::constant(1);
  for (size_t i = begin; i < end; ++i) p = p * es[i];
  return p;
}

// A buffer's name as the text writes it (codegen/kernel_ir_text.h reads it
// back): bare where it can be, quoted otherwise and where it reads as -1, which
// is "no buffer" in gemm and conv lines.
std::string buffer_name_text(const std::string& name) { return name == "-1" ? quote(name) : name_text(name); }

// Prints a kernel; with `anonymous` set, the kernel name, node names and buffer
// names are left out or replaced by positions, which is what structural_key needs.
class Printer {
 public:
  Printer(const Kernel& k, bool anonymous) : k_(k), anonymous_(anonymous) {}

  std::string print() {
    header();
    if (!anonymous_ && !k_.nodes.empty()) {
      out_ += "  nodes ";
      for (size_t i = 0; i < k_.nodes.size(); ++i) out_ += (i ? ", " : "") + name_text(k_.nodes[i]);
      out_ += "\n";
    }
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const Buffer& b = k_.buffers[i];
      out_ += "  buffer " + buffer_ref(static_cast<int>(i)) + ": " + std::string(dtype_name(b.dtype)) + "[" +
              join_exprs(b.shape, 0, b.shape.size()) + "] " + (b.output ? "out" : "in") + "\n";
    }
    if (k_.zero_outputs) out_ += "  outputs zeroed first\n";
    if (k_.copy_from >= 0) out_ += "  outputs copied from " + buffer_ref(k_.copy_from) + " first\n";
    if (k_.gemm) gemm(*k_.gemm);
    if (k_.conv) conv(*k_.conv);
    if (k_.attention) attention(*k_.attention);
    if (k_.topk)
      out_ += "  topk x=" + buffer_ref(k_.topk->x) + " length=" + std::to_string(k_.topk->length) +
              " largest=" + std::to_string(k_.topk->largest) + "\n";
    if (k_.recurrence) recurrence(*k_.recurrence);
    if (k_.nms) {
      out_ += "  nms center=" + std::to_string(k_.nms->center) + " boxes=" + k_.nms->boxes.str();
      for (const auto& [key, b] : nms_buffers(*k_.nms)) out_ += std::string(" ") + key + "=" + buffer_ref(b);
      out_ += "\n";
    }
    if (const auto& r = k_.roi_align) {
      out_ += "  roi_align max=" + std::to_string(r->max) + " half_pixel=" + std::to_string(r->half_pixel) +
              " sampling_ratio=" + std::to_string(r->sampling_ratio) + " spatial_scale=" + format_double(r->spatial_scale);
      for (const auto& [key, b] : roi_align_buffers(*r)) out_ += std::string(" ") + key + "=" + buffer_ref(b);
      out_ += "\n";
    }
    if (k_.schedule && !anonymous_) schedule(*k_.schedule);
    for (size_t i = 0; i < k_.body.size(); ++i) instr(static_cast<int>(i), k_.body[i]);
    return out_;
  }

 private:
  // `schedule block=N` and every other knob that is not KernelConfig's default.
  void schedule(const KernelConfig& c) {
    static const KernelConfig defaults;
    out_ += "  schedule block=" + std::to_string(c.block);
    for (const ScheduleKnob& knob : schedule_knobs()) {
      int value = knob.number ? c.*knob.number : c.*knob.flag;
      int fallback = knob.number ? defaults.*knob.number : defaults.*knob.flag;
      if (knob.number != &KernelConfig::block && value != fallback)
        out_ += " " + std::string(knob.name) + "=" + std::to_string(value);
    }
    out_ += "\n";
  }

  void header() {
    out_ += "kernel ";
    if (!anonymous_) out_ += name_text(k_.name) + " ";
    out_ += kind_name(k_.kind);
    size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
    out_ += " domain [" + join_exprs(k_.domain, 0, outer);
    if (k_.kind == Kind::Reduction) out_ += std::string(outer ? " " : "") + "| ";
    out_ += join_exprs(k_.domain, outer, k_.domain.size()) + "]";
    if (!k_.size_params.empty()) {
      out_ += " sizes(";
      for (size_t i = 0; i < k_.size_params.size(); ++i) out_ += (i ? ", " : "") + k_.size_params[i];
      out_ += ")";
    }
    out_ += "\n";
  }

  std::string buffer_ref(int b) const {
    if (b < 0) return "-1";
    TCC_CHECK(b < static_cast<int>(k_.buffers.size())) << "buffer " << b << " of kernel " << k_.name;
    return anonymous_ ? "#" + std::to_string(b) : buffer_name_text(k_.buffers[b].name);
  }

  static std::string index(const Index& ix) {
    std::string s = "[" + join_exprs(ix.strides, 0, ix.strides.size()) + "]";
    if (ix.offset != SymExpr()) s += " + " + ix.offset.str();
    return s;
  }

  void gemm(const GemmDesc& g) {
    out_ += "  gemm a=" + buffer_ref(g.a) + " b=" + buffer_ref(g.b) + " trans_a=" + std::to_string(g.trans_a) +
            " trans_b=" + std::to_string(g.trans_b) + " batch=" + g.batch.str() + " m=" + g.m.str() +
            " n=" + g.n.str() + " k=" + g.k.str() + " lda=" + g.lda.str() + " ldb=" + g.ldb.str() +
            " ldd=" + g.ldd.str() + " stride_a=" + g.stride_a.str() + " stride_b=" + g.stride_b.str() +
            " stride_d=" + g.stride_d.str() + " alpha=" + format_double(g.alpha) +
            " beta=" + format_double(g.beta) + " bias=" + buffer_ref(g.bias) +
            " residual=" + buffer_ref(g.residual) + " activation=" + g.activation + "\n";
  }

  static std::string ints(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }

  void conv(const ConvDesc& c) {
    out_ += "  conv x=" + buffer_ref(c.x) + " w=" + buffer_ref(c.w) + " n=" + c.n.str() + " c=" + c.c.str() +
            " k=" + c.k.str() + " in=[" + join_exprs(c.in, 0, c.in.size()) + "] out=[" +
            join_exprs(c.out, 0, c.out.size()) + "] kernel=" + ints(c.kernel) + " strides=" + ints(c.strides) +
            " dilations=" + ints(c.dilations) + " pads=" + ints(c.pads) + " groups=" + std::to_string(c.groups) +
            " bias=" + buffer_ref(c.bias) + " residual=" + buffer_ref(c.residual) + " activation=" + c.activation +
            "\n";
  }

  static std::string strides(const SymExpr* s, size_t n) {
    std::string out = "[";
    for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + s[i].str();
    return out + "]";
  }

  void attention(const AttentionDesc& a) {
    out_ += "  attention q=" + buffer_ref(a.q) + " k=" + buffer_ref(a.k) + " v=" + buffer_ref(a.v) +
            " mask=" + buffer_ref(a.mask) + " heads=" + std::to_string(a.heads) +
            " kv_heads=" + std::to_string(a.kv_heads) + " head_size=" + std::to_string(a.head_size) +
            " v_head_size=" + std::to_string(a.v_head_size) + " batch=" + a.batch.str() + " q_len=" + a.q_len.str() +
            " kv_len=" + a.kv_len.str() + " q_strides=" + strides(a.q_strides.data(), 3) +
            " k_strides=" + strides(a.k_strides.data(), 3) + " v_strides=" + strides(a.v_strides.data(), 3) +
            " mask_strides=" + strides(a.mask_strides.data(), 4) + " scale=" + format_double(a.scale) +
            " softcap=" + format_double(a.softcap) + " causal=" + std::to_string(a.causal);
    if (a.tf32) out_ += " tf32=1";
    if (a.q_offset != SymExpr() || a.k_offset != SymExpr() || a.v_offset != SymExpr()) {
      const std::array<SymExpr, 3> o{a.q_offset, a.k_offset, a.v_offset};
      out_ += " offsets=" + strides(o.data(), 3);
    }
    if (a.lse >= 0) out_ += " lse=" + buffer_ref(a.lse);
    if (a.pass != AttentionPass::Forward)
      out_ += std::string(" pass=") + attention_pass_name(a.pass) + " dout=" + buffer_ref(a.dout) +
              " aux=" + buffer_ref(a.aux) + " dout_strides=" + strides(a.dout_strides.data(), 3) +
              " aux_strides=" + strides(a.aux_strides.data(), 3);
    if (a.pass == AttentionPass::GradKV)
      out_ += " dv=" + buffer_ref(a.dv) + " dv_strides=" + strides(a.dv_strides.data(), 3);
    out_ += "\n";
  }

  void recurrence(const RecurrenceDesc& r) {
    out_ += std::string("  recurrence cell=") + recurrent_cell_name(r.cell) +
            " directions=" + std::to_string(r.directions) + " hidden=" + std::to_string(r.hidden) +
            " reverse=" + std::to_string(r.reverse) + " clip=" + format_double(r.clip) +
            " linear_before_reset=" + std::to_string(r.linear_before_reset) +
            " input_forget=" + std::to_string(r.input_forget) + " seq=" + r.seq.str() + " batch=" + r.batch.str();
    for (const auto& [key, b] : recurrence_buffers(r)) out_ += std::string(" ") + key + "=" + buffer_ref(b);
    out_ += "\n";
  }

  void instr(int i, const Instr& in) {
    out_ += "  %" + std::to_string(i);
    if (in.op != Op::Store) out_ += ": " + std::string(dtype_name(in.dtype));
    if (in.row) out_ += " row";
    out_ += " = " + std::string(op_name(in.op));
    std::string sep = " ";
    if (in.op == Op::Load || in.op == Op::Store) {
      out_ += " " + buffer_ref(in.buffer) + " " + index(in.index);
      if (in.dynamic >= 0) out_ += " + %" + std::to_string(in.dynamic) + "*" + in.dynamic_stride.str();
      if (in.accumulate != Accumulate::None) out_ += " " + std::string(accumulate_name(in.accumulate));
      sep = ", ";
    } else if (in.op == Op::Const) {
      out_ += " " + format_double(in.value);
    } else if (in.op == Op::SizeValue) {
      out_ += " " + in.size.str();
    } else if (in.op == Op::Coord || in.op == Op::RecurrenceArg || in.op == Op::RecurrenceResult) {
      out_ += " " + std::to_string(in.axis);
    }
    for (size_t a = 0; a < in.args.size(); ++a) {
      TCC_CHECK(in.args[a] >= 0 && in.args[a] < i) << "instruction %" << i << " of kernel " << k_.name
                                                   << " reads %" << in.args[a];
      out_ += (a ? ", " : sep) + "%" + std::to_string(in.args[a]);
    }
    out_ += "\n";
  }

  const Kernel& k_;
  bool anonymous_;
  std::string out_;
};

bool counts_as_flop(Op op) {
  switch (op) {
    case Op::Load:
    case Op::Store:
    case Op::Const:
    case Op::SizeValue:
    case Op::Coord:
    case Op::RandomOffset:
    case Op::Cast:
      return false;
    default:
      return true;
  }
}

}  // namespace

const char* recurrent_cell_name(RecurrentCell c) {
  switch (c) {
    case RecurrentCell::Rnn: return "rnn";
    case RecurrentCell::Gru: return "gru";
    case RecurrentCell::Lstm: return "lstm";
  }
  return "";
}

std::vector<std::pair<const char*, int*>> recurrence_buffers(RecurrenceDesc& r) {
  return {{"xw", &r.xw},         {"r", &r.r}, {"b", &r.b},   {"lens", &r.lens},
          {"init_h", &r.init_h}, {"init_c", &r.init_c},    {"p", &r.p}, {"y", &r.y},
          {"y_h", &r.y_h},       {"y_c", &r.y_c}};
}

std::vector<std::pair<const char*, int*>> nms_buffers(NmsDesc& n) {
  return {{"box_data", &n.box_data},   {"scores", &n.scores},     {"max_output", &n.max_output},
          {"iou_threshold", &n.iou_threshold}, {"score_threshold", &n.score_threshold},
          {"selected", &n.selected}, {"count", &n.count}};
}

std::vector<std::pair<const char*, int>> nms_buffers(const NmsDesc& n) {
  std::vector<std::pair<const char*, int>> out;
  for (const auto& [key, b] : nms_buffers(const_cast<NmsDesc&>(n))) out.emplace_back(key, *b);
  return out;
}

std::vector<std::pair<const char*, int*>> roi_align_buffers(RoiAlignDesc& r) {
  return {{"x", &r.x}, {"rois", &r.rois}, {"batch_indices", &r.batch_indices}, {"y", &r.y}};
}

std::vector<std::pair<const char*, int>> roi_align_buffers(const RoiAlignDesc& r) {
  std::vector<std::pair<const char*, int>> out;
  for (const auto& [key, b] : roi_align_buffers(const_cast<RoiAlignDesc&>(r))) out.emplace_back(key, *b);
  return out;
}

std::vector<std::pair<const char*, int>> recurrence_buffers(const RecurrenceDesc& r) {
  std::vector<std::pair<const char*, int>> out;
  for (const auto& [key, b] : recurrence_buffers(const_cast<RecurrenceDesc&>(r))) out.emplace_back(key, *b);
  return out;
}

const char* accumulate_name(Accumulate a) {
  switch (a) {
    case Accumulate::None: return "";
    case Accumulate::Add: return "add";
    case Accumulate::Mul: return "mul";
    case Accumulate::Max: return "max";
    case Accumulate::Min: return "min";
  }
  TCC_CHECK(false) << "unnamed accumulation " << static_cast<int>(a);
  return "";
}

const char* attention_pass_name(AttentionPass p) {
  switch (p) {
    case AttentionPass::Forward: return "forward";
    case AttentionPass::Stats: return "stats";
    case AttentionPass::GradQ: return "grad_q";
    case AttentionPass::GradK: return "grad_k";
    case AttentionPass::GradV: return "grad_v";
    case AttentionPass::GradKV: return "grad_kv";
  }
  TCC_CHECK(false) << "unnamed attention pass " << static_cast<int>(p);
  return "";
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Load: return "load";
    case Op::Store: return "store";
    case Op::Const: return "const";
    case Op::SizeValue: return "size";
    case Op::Coord: return "coord";
    case Op::RandomOffset: return "random_offset";
#define TCC_SCALAR_OP(name, text) \
  case Op::name:                  \
    return text;
#include "src/ops/scalar_ops.def"
#undef TCC_SCALAR_OP
    case Op::ReduceSum: return "reduce_sum";
    case Op::ReduceMax: return "reduce_max";
    case Op::ReduceMin: return "reduce_min";
    case Op::ReduceProd: return "reduce_prod";
    case Op::ScanSum: return "scan_sum";
    case Op::MatMulAcc: return "matmul_acc";
    case Op::ConvAcc: return "conv_acc";
    case Op::AttentionAcc: return "attention_acc";
    case Op::TopKValue: return "topk_value";
    case Op::TopKIndex: return "topk_index";
    case Op::RecurrenceArg: return "recurrence_arg";
    case Op::RecurrenceResult: return "recurrence_result";
  }
  TCC_CHECK(false) << "unnamed kernel op " << static_cast<int>(op);
  return "";
}

std::string print_kernel(const Kernel& k) { return Printer(k, false).print(); }

const std::vector<ScheduleKnob>& schedule_knobs() {
  static const std::vector<ScheduleKnob> knobs = {
      {"block", &KernelConfig::block},
      {"vector_width", &KernelConfig::vector_width},
      {"rows_per_block", &KernelConfig::rows_per_block},
      {"split", &KernelConfig::split},
      {"columns", nullptr, &KernelConfig::columns},
      {"row_cache", &KernelConfig::row_cache},
      {"tiled", nullptr, &KernelConfig::tiled},
      {"algo", &KernelConfig::algo},
      {"tile", &KernelConfig::tile},
      {"lanes_per_row", &KernelConfig::lanes_per_row},
      {"mma", nullptr, &KernelConfig::mma},
  };
  return knobs;
}

SymExpr domain_size(const Kernel& k) { return product(k.domain, 0, k.domain.size()); }

SymExpr row_count(const Kernel& k) {
  TCC_CHECK(k.reduce_axes >= 0 && static_cast<size_t>(k.reduce_axes) <= k.domain.size())
      << "kernel " << k.name << " reduces " << k.reduce_axes << " of " << k.domain.size() << " axes";
  return product(k.domain, 0, k.domain.size() - static_cast<size_t>(k.reduce_axes));
}

SymExpr row_length(const Kernel& k) {
  TCC_CHECK(k.reduce_axes >= 0 && static_cast<size_t>(k.reduce_axes) <= k.domain.size())
      << "kernel " << k.name << " reduces " << k.reduce_axes << " of " << k.domain.size() << " axes";
  return product(k.domain, k.domain.size() - static_cast<size_t>(k.reduce_axes), k.domain.size());
}

SymExpr bytes_moved(const Kernel& k) {
  std::vector<std::vector<const Instr*>> loads(k.buffers.size());
  for (const Instr& in : k.body)
    if (in.op == Op::Load) loads[static_cast<size_t>(in.buffer)].push_back(&in);
  bool indexed = k.kind == Kind::Pointwise || k.kind == Kind::Reduction;
  SymExpr total;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const Buffer& buf = k.buffers[b];
    SymExpr elements = product(buf.shape, 0, buf.shape.size());
    // One plain load (no guard, no dynamic index) reaches the domain's extents
    // along the axes it steps: a slice or a broadcast reads part of its buffer.
    const Instr* only = loads[b].size() == 1 ? loads[b].front() : nullptr;
    if (indexed && !buf.output && only && only->args.empty() && only->dynamic < 0) {
      elements = SymExpr::constant(1);
      for (size_t d = 0; d < k.domain.size(); ++d)
        if (only->index.strides[d] != SymExpr()) elements = elements * k.domain[d];
    }
    total = total + elements * SymExpr::constant(static_cast<int64_t>(dtype_size(buf.dtype)));
  }
  return total;
}

SymExpr flop_count(const Kernel& k) {
  // TopK: a comparison per element of the row for each selection.
  if (k.topk) return domain_size(k) * SymExpr::constant(k.topk->length);
  // Recurrence: each step's h R^T, a multiply and an add per weight.
  if (const auto& r = k.recurrence)
    return domain_size(k) * r->seq * SymExpr::constant(2 * r->gates() * r->hidden * r->hidden);
  // NMS: an IoU test of each pair of boxes, about a dozen operations.
  if (k.nms) return domain_size(k) * k.nms->boxes * k.nms->boxes * SymExpr::constant(12);
  // RoiAlign: a product and a sum per tap, four taps per sample; an adaptive
  // grid's sample count is data, counted as one.
  if (const auto& r = k.roi_align)
    return domain_size(k) * SymExpr::constant(8 * std::max<int64_t>(r->sampling_ratio * r->sampling_ratio, 1));
  SymExpr per_point, per_row;
  for (const Instr& in : k.body) {
    if (!counts_as_flop(in.op)) continue;
    if (in.op == Op::MatMulAcc) {
      TCC_CHECK(k.gemm.has_value()) << "kernel " << k.name << " has a matmul_acc but no gemm description";
      per_point = per_point + SymExpr::constant(2) * k.gemm->k;
    } else if (in.op == Op::ConvAcc) {
      TCC_CHECK(k.conv.has_value()) << "kernel " << k.name << " has a conv_acc but no conv description";
      int64_t taps = 1;
      for (int64_t r : k.conv->kernel) taps *= r;
      per_point = per_point + SymExpr::constant(2 * taps) * k.conv->c.floordiv(SymExpr::constant(k.conv->groups));
    } else if (in.op == Op::AttentionAcc) {
      // Per output element: its share of Q K^T (2 * head_size * kv_len over v_head_size elements) and of P V.
      TCC_CHECK(k.attention.has_value()) << "kernel " << k.name << " has an attention_acc but no attention description";
      const AttentionDesc& a = *k.attention;
      const SymExpr d = SymExpr::constant(a.head_size), dv = SymExpr::constant(a.v_head_size), two = SymExpr::constant(2);
      // The backward's gradient passes per row of their domain: each score (2 d), dY . V (2 dv) and the
      // accumulations, over the keys of a query row or the query rows of a key's group; the statistics' dY . Y
      // (2 dv over its two elements), no score.
      // A causal mask leaves about half the pairs of queries and keys, whose
      // tiles the kernels skip: counted as half, as FlashAttention counts them.
      const auto visited = [&](const SymExpr& n) { return a.causal ? (n + SymExpr::constant(1)).floordiv(two) : n; };
      const SymExpr keys = visited(a.kv_len);
      const SymExpr group_rows = visited(SymExpr::constant(a.heads / a.kv_heads) * a.q_len);
      switch (a.pass) {
        case AttentionPass::Forward:
          per_point = per_point + (two * d * keys).floordiv(dv) + two * keys;
          break;
        case AttentionPass::Stats: per_point = per_point + dv; break;
        case AttentionPass::GradQ: per_point = per_point + (two * (d + d + dv) * keys).floordiv(d); break;
        case AttentionPass::GradK: per_point = per_point + (two * (d + d + dv) * group_rows).floordiv(d); break;
        case AttentionPass::GradV: per_point = per_point + (two * (d + dv + dv) * group_rows).floordiv(dv); break;
        case AttentionPass::GradKV: per_point = per_point + (two * (d + d + dv + dv) * group_rows).floordiv(d); break;
      }
    } else if (in.row && in.op != Op::ReduceSum && in.op != Op::ReduceMax && in.op != Op::ReduceMin &&
               in.op != Op::ReduceProd) {
      per_row = per_row + SymExpr::constant(1);
    } else {
      // A reduction accumulates once per element of the row.
      per_point = per_point + SymExpr::constant(1);
    }
  }
  return per_point * domain_size(k) + per_row * row_count(k);
}

bool draws_random(const Kernel& k) {
  return std::any_of(k.body.begin(), k.body.end(), [](const Instr& in) { return in.op == Op::RandomOffset; });
}

std::string structural_key(const Kernel& k) { return Printer(k, true).print(); }

}  // namespace tcc::kir
