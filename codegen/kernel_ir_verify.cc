#include "codegen/kernel_ir_verify.h"

#include <algorithm>
#include <set>

#include "codegen/kernel_schedule.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/recurrent.h"

namespace tcc::kir {

namespace {

// The groups of kernel_ir.h's Op list, by their first and last members.
bool is_unary_math(Op op) { return op >= Op::Neg && op <= Op::BitNot; }
bool is_arithmetic(Op op) { return op >= Op::Add && op <= Op::ShiftRight; }
bool is_bitwise(Op op) { return op == Op::BitNot || (op >= Op::BitAnd && op <= Op::ShiftRight); }
bool is_logic(Op op) { return op == Op::And || op == Op::Or || op == Op::Xor || op == Op::Not; }
bool is_comparison(Op op) { return op >= Op::Equal && op <= Op::GreaterOrEqual; }
bool is_reduction(Op op) { return op >= Op::ReduceSum && op <= Op::ReduceProd; }

// How many operands op takes: {least, most}.
std::pair<size_t, size_t> arity(Op op) {
  switch (op) {
    case Op::Load: return {0, 1};   // an optional guard
    case Op::Store: return {1, 2};  // the value, an optional guard
    case Op::Const:
    case Op::SizeValue:
    case Op::Coord:
    case Op::RandomOffset:
    case Op::MatMulAcc:
    case Op::ConvAcc:
    case Op::AttentionAcc:
    case Op::TopKValue:
    case Op::TopKIndex:
    case Op::RecurrenceArg: return {0, 0};
    case Op::RecurrenceResult: return {1, 1};
    case Op::Where: return {3, 3};
    default: break;
  }
  if (is_unary_math(op) || op == Op::Not || op == Op::IsNaN || op == Op::Cast || is_reduction(op) || op == Op::ScanSum)
    return {1, 1};
  return {2, 2};
}

class Verifier {
 public:
  explicit Verifier(const Kernel& k) : k_(k), rank_(k.domain.size()) {}

  void run() {
    domain();
    buffers();
    for (size_t i = 0; i < k_.body.size(); ++i) instr(static_cast<int>(i));
    outputs_stored();
    if (k_.gemm) gemm(*k_.gemm);
    if (k_.conv) conv(*k_.conv);
    if (k_.attention) attention(*k_.attention);
    if (k_.topk) topk(*k_.topk);
    if (k_.recurrence) recurrence(*k_.recurrence);
    if (k_.nms) nms(*k_.nms);
    if (k_.roi_align) roi_align(*k_.roi_align);
    sizes();
    // Last: the emitters' refusals read a kernel that is otherwise valid.
    if (k_.schedule) {
      std::string why = config_refusal(k_, *k_.schedule);
      if (!why.empty()) fail(-1, "schedule: " + why);
    }
  }

 private:
  // Caught by verify_kernel: the first problem ends the walk.
  [[noreturn]] static void fail(int instr, const std::string& message) { throw KernelProblem{instr, message}; }

  static std::string ref(int i) { return "%" + std::to_string(i); }
  std::string what(int i) const { return ref(i) + " (" + op_name(k_.body[static_cast<size_t>(i)].op) + ")"; }
  const Instr& at(int i) const { return k_.body[static_cast<size_t>(i)]; }

  void domain() {
    if (k_.kind == Kind::Reduction) {
      if (k_.reduce_axes < 1 || static_cast<size_t>(k_.reduce_axes) > rank_)
        fail(-1, "a reduction kernel reduces " + std::to_string(k_.reduce_axes) + " axes of its domain of rank " +
                     std::to_string(rank_) + " (at least one, at most all)");
    } else if (k_.reduce_axes != 0) {
      fail(-1, std::string("a ") + kind_name(k_.kind) + " kernel reduces no axes");
    }
    if (k_.gemm.has_value() != (k_.kind == Kind::Gemm)) fail(-1, "a gemm description belongs to a gemm kernel only");
    if (k_.conv.has_value() != (k_.kind == Kind::Conv)) fail(-1, "a conv description belongs to a conv kernel only");
    if (k_.attention.has_value() != (k_.kind == Kind::Attention))
      fail(-1, "an attention description belongs to an attention kernel only");
    if (k_.topk.has_value() != (k_.kind == Kind::TopK)) fail(-1, "a topk description belongs to a topk kernel only");
    if (k_.recurrence.has_value() != (k_.kind == Kind::Recurrence))
      fail(-1, "a recurrence description belongs to a recurrence kernel only");
    if (k_.nms.has_value() != (k_.kind == Kind::Nms)) fail(-1, "an nms description belongs to an nms kernel only");
    if (k_.roi_align.has_value() != (k_.kind == Kind::RoiAlign))
      fail(-1, "a roi_align description belongs to a roi_align kernel only");
  }

  void buffers() {
    std::set<std::string> names;
    bool outputs = false;
    for (const Buffer& b : k_.buffers) {
      if (!names.insert(b.name).second) fail(-1, "two buffers are named '" + b.name + "'");
      if (!b.output && outputs) fail(-1, "input buffer '" + b.name + "' follows an output (inputs come first)");
      outputs = outputs || b.output;
    }
    if (!outputs) fail(-1, "the kernel has no output buffer");
    if (k_.copy_from != -1) copied_output();
  }

  // The one output starts as a copy of an input of its dtype and shape.
  void copied_output() const {
    if (k_.zero_outputs) fail(-1, "the outputs are zeroed first and copied first");
    if (!declared(k_.copy_from) || k_.buffers[static_cast<size_t>(k_.copy_from)].output)
      fail(-1, "the outputs are copied from buffer " + std::to_string(k_.copy_from) + ", which is not an input");
    const Buffer& from = k_.buffers[static_cast<size_t>(k_.copy_from)];
    if (k_.buffers.back().output && k_.buffers[k_.buffers.size() - 2].output)
      fail(-1, "the outputs are copied from '" + from.name + "', but there are several");
    const Buffer& out = k_.buffers.back();
    if (out.dtype != from.dtype || out.shape != from.shape)
      fail(-1, "output '" + out.name + "' is copied from '" + from.name + "', which differs in dtype or shape");
  }

  bool declared(int b) const { return b >= 0 && static_cast<size_t>(b) < k_.buffers.size(); }

  // An earlier instruction's index, checked.
  void operand(int i, int a) const {
    if (a < 0 || a >= i) fail(i, what(i) + " reads " + ref(a) + ", which is not defined before it");
  }

  void expect_dtype(int i, int a, DType t, const char* role) const {
    if (at(a).dtype != t)
      fail(i, what(i) + ": its " + role + " " + ref(a) + " is " + std::string(dtype_name(at(a).dtype)) + ", not " +
                  std::string(dtype_name(t)));
  }

  void instr(int i) {
    const Instr& in = at(i);
    for (int a : in.args) operand(i, a);
    auto [least, most] = arity(in.op);
    if (in.args.size() < least || in.args.size() > most)
      fail(i, what(i) + " takes " + (least == most ? std::to_string(least) : std::to_string(least) + " or " +
                                                                                std::to_string(most)) +
                  " operands, not " + std::to_string(in.args.size()));
    bool memory = in.op == Op::Load || in.op == Op::Store;
    if (memory) access(i, in);
    else if (in.dynamic >= 0) fail(i, what(i) + " has a dynamic index, as only loads and stores do");
    if (in.accumulate != Accumulate::None && in.op != Op::Store) fail(i, what(i) + " accumulates, as only stores do");
    if (in.op == Op::Coord && (in.axis < 0 || static_cast<size_t>(in.axis) >= rank_))
      fail(i, what(i) + " reads axis " + std::to_string(in.axis) + " of a domain of rank " + std::to_string(rank_));
    dtypes(i, in);
    rows(i, in);
    if (in.op == Op::MatMulAcc && k_.kind != Kind::Gemm) fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not a gemm kernel");
    if (in.op == Op::ConvAcc && k_.kind != Kind::Conv) fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not a conv kernel");
    if (in.op == Op::AttentionAcc && k_.kind != Kind::Attention)
      fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not an attention kernel");
    if ((in.op == Op::TopKValue || in.op == Op::TopKIndex) && k_.kind != Kind::TopK)
      fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not a topk kernel");
    if (in.op == Op::RandomOffset && k_.kind != Kind::Pointwise && k_.kind != Kind::Reduction)
      fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not a pointwise or reduction kernel");
    if (in.op == Op::RandomOffset && in.dtype != DType::U64)
      fail(i, what(i) + " gives u64, not " + std::string(dtype_name(in.dtype)));
    if ((in.op == Op::RecurrenceArg || in.op == Op::RecurrenceResult) && k_.kind != Kind::Recurrence)
      fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not a recurrence kernel");
  }

  void access(int i, const Instr& in) {
    if (!declared(in.buffer)) fail(i, what(i) + " names buffer " + std::to_string(in.buffer) + ", which is not declared");
    const Buffer& b = k_.buffers[static_cast<size_t>(in.buffer)];
    if (in.op == Op::Store && !b.output) fail(i, what(i) + " writes '" + b.name + "', an input buffer");
    if (in.accumulate != Accumulate::None && !atomic_update_dtype(b.dtype))
      fail(i, what(i) + " accumulates into '" + b.name + "', which is " + std::string(dtype_name(b.dtype)) +
                  " (atomic updates are of f32, f64, i32 or i64)");
    if (in.index.strides.size() != rank_)
      fail(i, what(i) + " has " + std::to_string(in.index.strides.size()) + " stride(s) for a domain of rank " +
                  std::to_string(rank_));
    size_t guard = in.op == Op::Load ? 0 : 1;
    if (in.args.size() > guard) expect_dtype(i, in.args[guard], DType::Bool, "guard");
    if (in.dynamic >= 0) {
      operand(i, in.dynamic);
      if (!is_integer(at(in.dynamic).dtype))
        fail(i, what(i) + " indexes by " + ref(in.dynamic) + ", which is " +
                    std::string(dtype_name(at(in.dynamic).dtype)) + ", not an integer");
    }
  }

  void dtypes(int i, const Instr& in) {
    Op op = in.op;
    if (is_unary_math(op) || is_arithmetic(op) || is_reduction(op) || op == Op::ScanSum || op == Op::Pow) {
      // Pow's exponent may have another dtype (ONNX Pow).
      size_t same = op == Op::Pow ? 1 : in.args.size();
      for (size_t a = 0; a < same; ++a) expect_dtype(i, in.args[a], in.dtype, "operand");
    } else if (is_comparison(op)) {
      if (at(in.args[0]).dtype != at(in.args[1]).dtype)
        fail(i, what(i) + " compares " + std::string(dtype_name(at(in.args[0]).dtype)) + " with " +
                    std::string(dtype_name(at(in.args[1]).dtype)));
    } else if (is_logic(op)) {
      for (int a : in.args) expect_dtype(i, a, DType::Bool, "operand");
    } else if (op == Op::Where) {
      expect_dtype(i, in.args[0], DType::Bool, "condition");
      expect_dtype(i, in.args[1], in.dtype, "operand");
      expect_dtype(i, in.args[2], in.dtype, "operand");
    }
    if ((is_comparison(op) || is_logic(op) || op == Op::IsNaN) && in.dtype != DType::Bool)
      fail(i, what(i) + " gives bool, not " + std::string(dtype_name(in.dtype)));
    if (is_bitwise(op) && !is_integer(in.dtype))
      fail(i, what(i) + " works on integers, not " + std::string(dtype_name(in.dtype)));
  }

  void rows(int i, const Instr& in) {
    if (in.op == Op::ScanSum) scan(i, in);
    if (k_.kind != Kind::Reduction) {
      if (in.row) fail(i, what(i) + " is a row value in a " + kind_name(k_.kind) + " kernel");
      if (is_reduction(in.op)) fail(i, what(i) + " is in a " + kind_name(k_.kind) + " kernel, not a reduction kernel");
      return;
    }
    if (is_reduction(in.op)) {
      if (!in.row) fail(i, what(i) + " is not marked row: a reduction gives one value per row");
      return;
    }
    // A load's rowness is its index's; a coordinate's is where the emitter computes it.
    if (!in.row || in.op == Op::Load || in.op == Op::Coord) return;
    for (int a : in.args)
      if (!at(a).row) fail(i, what(i) + " is a row value but reads " + ref(a) + ", an element value");
  }

  // A scan runs along the one reduced axis of a reduction kernel that reduces nothing.
  void scan(int i, const Instr& in) const {
    if (k_.kind != Kind::Reduction || k_.reduce_axes != 1 || in.row)
      fail(i, what(i) + " is not an element value of a reduction kernel of one reduced axis");
    for (size_t r = 0; r < k_.body.size(); ++r)
      if (is_reduction(k_.body[r].op))
        fail(i, what(i) + " is in a kernel that reduces (" + ref(static_cast<int>(r)) + "), which scans do not share");
  }

  void outputs_stored() const {
    std::vector<bool> stored(k_.buffers.size(), false);
    for (const Instr& in : k_.body)
      if (in.op == Op::Store) stored[static_cast<size_t>(in.buffer)] = true;
    if (const auto& r = k_.recurrence)
      for (int b : {r->y, r->y_h, r->y_c})
        if (declared(b)) stored[static_cast<size_t>(b)] = true;
    if (const auto& n = k_.nms)
      for (int b : {n->selected, n->count})
        if (declared(b)) stored[static_cast<size_t>(b)] = true;
    if (const auto& r = k_.roi_align)
      if (declared(r->y)) stored[static_cast<size_t>(r->y)] = true;
    if (const auto& a = k_.attention)
      for (int b : {a->pass == AttentionPass::Forward ? a->lse : -1, a->dv})
        if (declared(b)) stored[static_cast<size_t>(b)] = true;
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      if (k_.buffers[b].output && !stored[b]) fail(-1, "output buffer '" + k_.buffers[b].name + "' is never stored");
  }

  // A descriptor's operand: an input buffer, or -1 where `optional`.
  void input_operand(const char* desc, const char* role, int b, bool optional) const {
    if (optional && b == -1) return;
    if (!declared(b) || k_.buffers[static_cast<size_t>(b)].output)
      fail(-1, std::string(desc) + " operand " + role + " is not an input buffer");
  }

  void one_accumulation(Op op) const {
    auto n = std::count_if(k_.body.begin(), k_.body.end(), [&](const Instr& in) { return in.op == op; });
    if (n != 1)
      fail(-1, std::string("a ") + kind_name(k_.kind) + " kernel has one " + op_name(op) + ", not " + std::to_string(n));
  }

  void gemm(const GemmDesc& g) const {
    input_operand("gemm", "a", g.a, false);
    input_operand("gemm", "b", g.b, false);
    input_operand("gemm", "bias", g.bias, true);
    input_operand("gemm", "residual", g.residual, true);
    if (g.activation != "none" && g.activation != "relu" && g.activation != "gelu_tanh")
      fail(-1, "gemm activation '" + g.activation + "' is none of none, relu, gelu_tanh");
    if (rank_ < 2) fail(-1, "a gemm kernel's domain is [batch..., M, N], of rank 2 or more");
    one_accumulation(Op::MatMulAcc);
  }

  void conv(const ConvDesc& c) const {
    input_operand("conv", "x", c.x, false);
    input_operand("conv", "w", c.w, false);
    input_operand("conv", "bias", c.bias, true);
    input_operand("conv", "residual", c.residual, true);
    if (c.activation != "none" && c.activation != "relu")
      fail(-1, "conv activation '" + c.activation + "' is none of none, relu");
    size_t spatial = c.out.size();
    for (size_t n : {c.in.size(), c.kernel.size(), c.strides.size(), c.dilations.size(), c.pads.size()})
      if (n != spatial) fail(-1, "conv in, out, kernel, strides, dilations and pads differ in length");
    if (rank_ != spatial + 2) fail(-1, "a conv kernel's domain is [n, k, spatial...], of rank " + std::to_string(spatial + 2));
    if (c.groups < 1) fail(-1, "conv groups is " + std::to_string(c.groups) + ", not 1 or more");
    one_accumulation(Op::ConvAcc);
  }

  void attention(const AttentionDesc& a) const {
    const bool forward = a.pass == AttentionPass::Forward, stats = a.pass == AttentionPass::Stats;
    if (stats) {
      // It reads dY, Y and the log-sum-exp alone.
      if (a.q != -1 || a.k != -1 || a.v != -1 || a.mask != -1)
        fail(-1, "an attention statistics pass reads no q, k, v or mask (each -1)");
    } else {
      input_operand("attention", "q", a.q, false);
      input_operand("attention", "k", a.k, false);
      input_operand("attention", "v", a.v, false);
      input_operand("attention", "mask", a.mask, true);
    }
    if (a.heads < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0)
      fail(-1, "attention heads " + std::to_string(a.heads) + " are not a positive multiple of kv_heads " +
                   std::to_string(a.kv_heads));
    if (a.head_size < 1 || a.v_head_size < 1) fail(-1, "attention head sizes must be positive");
    if (forward != (a.dout < 0) || forward != (a.aux < 0))
      fail(-1, "the attention backward's passes, and they alone, read dout and aux");
    if (!forward && (a.q_offset != SymExpr() || a.k_offset != SymExpr() || a.v_offset != SymExpr()))
      fail(-1, "only an attention forward reads its operands from offsets");
    if (!forward) {
      input_operand("attention", "dout", a.dout, false);
      input_operand("attention", "aux", a.aux, false);
    }
    auto dtype = [&](int b) { return k_.buffers[static_cast<size_t>(b)].dtype; };
    // The operands' dtype: Q's, or dY's in the statistics pass (which has no Q).
    const DType t = dtype(stats ? a.dout : a.q);
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      fail(-1, "attention operands must be f32, f16 or bf16, not " + std::string(dtype_name(t)));
    const DType out = stats ? DType::F32 : t;
    if (a.tf32 && (stats || t != DType::F32))
      fail(-1, "only an attention over f32 operands, the forward or a gradient pass, is tf32");
    one_accumulation(Op::AttentionAcc);
    int stored = -1;
    for (const Instr& in : k_.body)
      if (in.op == Op::Store) stored = in.buffer;
    if ((!stats && (dtype(a.k) != t || dtype(a.v) != t)) || !declared(stored) || dtype(stored) != out)
      fail(-1, std::string("attention operands q, k and v must share a dtype, which the output has") +
                   (stats ? " (f32: the statistics)" : ""));
    if (forward || stats) {
      if (stats) input_operand("attention", "lse", a.lse, false);
      else if (a.lse != -1 && (!declared(a.lse) || !k_.buffers[static_cast<size_t>(a.lse)].output))
        fail(-1, "an attention forward's lse is an output buffer");
      if (a.lse != -1 && dtype(a.lse) != DType::F32) fail(-1, "an attention's lse is f32");
    } else if (a.lse != -1) {
      fail(-1, "only the attention forward and its statistics pass have an lse");
    }
    const bool kv = a.pass == AttentionPass::GradKV;
    if (kv != (a.dv != -1)) fail(-1, "the attention backward's grad_kv pass, and it alone, writes dv");
    if (kv && (!declared(a.dv) || !k_.buffers[static_cast<size_t>(a.dv)].output || dtype(a.dv) != t))
      fail(-1, "an attention backward's dv is an output buffer of the operands' dtype");
    if (a.mask >= 0 && dtype(a.mask) != DType::Bool && dtype(a.mask) != DType::F32 && dtype(a.mask) != t)
      fail(-1, "an attention mask must be bool, f32 or of the operands' dtype");
    if (!forward) {
      if (dtype(a.dout) != t || dtype(a.aux) != (stats ? t : DType::F32))
        fail(-1, "an attention backward's dout is of the operands' dtype, its aux too (Y) or f32 (statistics)");
    }
    if (rank_ != 4) fail(-1, "an attention kernel's domain is [batch, heads, rows, size], of rank 4");
  }

  // Values and Indices as the domain [outer, k, inner] steps through them: each selection stored at most once.
  void topk(const TopKDesc& t) const {
    input_operand("topk", "x", t.x, false);
    if (rank_ != 3 || !k_.domain[1].is_constant())
      fail(-1, "a topk kernel's domain is [outer, k, inner], of rank 3 with a static k");
    const int64_t k = k_.domain[1].constant_value();
    if (k < 1 || t.length < k)
      fail(-1, "topk selects k = " + std::to_string(k) + " of rows of " + std::to_string(t.length) +
                   " (at least one, at most the row)");
    const DType x = k_.buffers[static_cast<size_t>(t.x)].dtype;
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const Instr& in = k_.body[i];
      const int n = static_cast<int>(i);
      if (in.op == Op::TopKValue && in.dtype != x)
        fail(n, what(n) + " is " + std::string(dtype_name(in.dtype)) + ", not x's " + std::string(dtype_name(x)));
      if (in.op == Op::TopKIndex && in.dtype != DType::I64) fail(n, what(n) + " is not i64");
      if (in.op == Op::Load) fail(n, what(n) + ": a topk kernel reads x through its description only");
      if (in.op != Op::Store) continue;
      if (in.args.size() != 1 || (at(in.args[0]).op != Op::TopKValue && at(in.args[0]).op != Op::TopKIndex))
        fail(n, what(n) + " stores no topk_value or topk_index (unguarded)");
      if (in.accumulate != Accumulate::None || in.dynamic >= 0 || in.index.offset != SymExpr())
        fail(n, what(n) + " is not a plain store at the point");
      if (k_.buffers[static_cast<size_t>(in.buffer)].dtype != at(in.args[0]).dtype)
        fail(n, what(n) + " stores into a buffer of another dtype");
    }
  }

  // The boxes and scores (f32), the optional scalars, and the two i64
  // outputs over the domain [batch, classes]; no body.
  void nms(const NmsDesc& n) const {
    if (rank_ != 2) fail(-1, "an nms kernel's domain is [batch, classes], of rank 2");
    if (!k_.body.empty()) fail(0, "an nms kernel has no instructions");
    // nms_buffers' order: box_data, scores, the three optional scalars (max_output first), selected, count.
    const auto buffers = nms_buffers(n);
    for (size_t i = 0; i < buffers.size(); ++i) {
      const auto& [role, b] = buffers[i];
      const bool output = i >= 5, optional = i >= 2 && i < 5;
      if (optional && b == -1) continue;
      if (!declared(b) || k_.buffers[static_cast<size_t>(b)].output != output)
        fail(-1, std::string("nms buffer ") + role + " is not an " + (output ? "output" : "input") + " buffer");
      const DType want = output || i == 2 ? DType::I64 : DType::F32;
      if (k_.buffers[static_cast<size_t>(b)].dtype != want)
        fail(-1, std::string("nms buffer ") + role + " is not " + std::string(dtype_name(want)));
    }
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      if (k_.buffers[b].output && static_cast<int>(b) != n.selected && static_cast<int>(b) != n.count)
        fail(-1, "output '" + k_.buffers[b].name + "' is neither selected nor count");
  }

  // x [N, C, H, W] of f32 or f64, rois [rois, 4] of its dtype and
  // batch_indices [rois] i64 as input buffers; the one output y of x's dtype
  // over the domain [rois, C, output_height, output_width]; no body.
  void roi_align(const RoiAlignDesc& r) const {
    if (rank_ != 4) fail(-1, "a roi_align kernel's domain is [rois, channels, height, width], of rank 4");
    if (!k_.body.empty()) fail(0, "a roi_align kernel has no instructions");
    if (r.sampling_ratio < 0) fail(-1, "a roi_align kernel's sampling_ratio is not negative");
    for (const auto& [role, b] : roi_align_buffers(r)) {
      const bool output = b == r.y;
      if (!declared(b) || k_.buffers[static_cast<size_t>(b)].output != output)
        fail(-1, std::string("roi_align buffer ") + role + " is not an " + (output ? "output" : "input") + " buffer");
    }
    const Buffer& x = k_.buffers[static_cast<size_t>(r.x)];
    if ((x.dtype != DType::F32 && x.dtype != DType::F64) || x.shape.size() != 4)
      fail(-1, "roi_align buffer x is not an f32 or f64 image [N, C, H, W]");
    const DType want[] = {x.dtype, DType::I64, x.dtype};
    const int others[] = {r.rois, r.batch_indices, r.y};
    for (size_t i = 0; i < 3; ++i)
      if (k_.buffers[static_cast<size_t>(others[i])].dtype != want[i])
        fail(-1, "roi_align buffer " + k_.buffers[static_cast<size_t>(others[i])].name + " is not " +
                     std::string(dtype_name(want[i])));
    if (k_.buffers.size() != 4) fail(-1, "a roi_align kernel has its four buffers only");
  }

  // The operands and outputs the cell has, of one float dtype; each
  // activation computed once from its argument by scalar instructions.
  void recurrence(const RecurrenceDesc& r) const {
    if (rank_ != 2) fail(-1, "a recurrence kernel's domain is [directions, batch], of rank 2");
    if (r.directions != 1 && r.directions != 2) fail(-1, "a recurrence runs 1 or 2 directions");
    if (r.directions == 2 && r.reverse) fail(-1, "a bidirectional recurrence is not also reverse");
    if (k_.domain[0] != SymExpr::constant(r.directions) || k_.domain[1] != r.batch)
      fail(-1, "a recurrence kernel's domain is not [directions, batch]");
    if (r.hidden < 1) fail(-1, "a recurrence's hidden size is below 1");
    const bool lstm = r.cell == RecurrentCell::Lstm;
    input_operand("recurrence", "xw", r.xw, false);
    input_operand("recurrence", "r", r.r, false);
    for (auto [role, b] : {std::pair<const char*, int>{"b", r.b}, {"lens", r.lens}, {"init_h", r.init_h},
                           {"init_c", r.init_c}, {"p", r.p}})
      input_operand("recurrence", role, b, true);
    if (!lstm && (r.init_c >= 0 || r.p >= 0 || r.y_c >= 0))
      fail(-1, "only an LSTM recurrence has init_c, p and y_c");
    const DType t = k_.buffers[static_cast<size_t>(r.xw)].dtype;
    if (t != DType::F32 && t != DType::F64)
      fail(-1, "a recurrence computes in f32 or f64, not " + std::string(dtype_name(t)));
    if (recurrence_shared_elements(r.cell, r.hidden, r.linear_before_reset) * static_cast<int64_t>(dtype_size(t)) >
        kRecurrenceSharedBytes)
      fail(-1, "a recurrence of hidden size " + std::to_string(r.hidden) + " does not fit shared memory");
    std::vector<bool> outputs(k_.buffers.size(), false);
    for (const auto& [role, b] : recurrence_buffers(r)) {
      if (b < 0) continue;
      if (!declared(b)) fail(-1, std::string("recurrence buffer ") + role + " is not declared");
      const Buffer& buf = k_.buffers[static_cast<size_t>(b)];
      const bool output = std::string(role).rfind("y", 0) == 0;
      if (output != buf.output)
        fail(-1, std::string("recurrence buffer ") + role + " is not an " + (output ? "output" : "input"));
      if (output) outputs[static_cast<size_t>(b)] = true;
      const DType want = b == r.lens ? DType::I32 : t;
      if (buf.dtype != want)
        fail(-1, std::string("recurrence buffer ") + role + " is " + std::string(dtype_name(buf.dtype)) + ", not " +
                     std::string(dtype_name(want)));
    }
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      if (k_.buffers[b].output && !outputs[b]) fail(-1, "output '" + k_.buffers[b].name + "' is none of y, y_h, y_c");
    const int64_t activations = r.directions * r.functions();
    std::vector<int> results(static_cast<size_t>(activations), 0);
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const Instr& in = k_.body[i];
      const int n = static_cast<int>(i);
      if (in.op == Op::Load || in.op == Op::Store || in.op == Op::Coord)
        fail(n, what(n) + ": a recurrence kernel's body computes its activations only");
      if (in.op != Op::RecurrenceArg && in.op != Op::RecurrenceResult) continue;
      if (in.axis < 0 || in.axis >= activations)
        fail(n, what(n) + " names activation " + std::to_string(in.axis) + " of " + std::to_string(activations));
      if (in.dtype != t) fail(n, what(n) + " is not of the recurrence's dtype");
      if (in.op == Op::RecurrenceResult) ++results[static_cast<size_t>(in.axis)];
    }
    for (int64_t a = 0; a < activations; ++a)
      if (results[static_cast<size_t>(a)] != 1)
        fail(-1, "activation " + std::to_string(a) + " has not one recurrence_result");
  }

  void sizes() const {
    if (!std::is_sorted(k_.size_params.begin(), k_.size_params.end()) ||
        std::adjacent_find(k_.size_params.begin(), k_.size_params.end()) != k_.size_params.end())
      fail(-1, "sizes(...) are not sorted and unique");
    // `where` mentions e: an instruction (what(instr)) or a part of the kernel.
    auto mentions = [&](const SymExpr& e, int instr, const char* where) {
      for (const std::string& s : e.symbols())
        if (!std::binary_search(k_.size_params.begin(), k_.size_params.end(), s))
          fail(instr, (instr >= 0 ? what(instr) : std::string(where)) + " reads symbol '" + s +
                          "', which is not among the kernel's sizes(...)");
    };
    for (const SymExpr& d : k_.domain) mentions(d, -1, "the domain");
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const Instr& in = k_.body[i];
      for (const SymExpr& s : in.index.strides) mentions(s, static_cast<int>(i), "");
      for (const SymExpr* e : {&in.index.offset, &in.size, &in.dynamic_stride}) mentions(*e, static_cast<int>(i), "");
    }
    if (k_.gemm)
      for (const SymExpr* e : {&k_.gemm->batch, &k_.gemm->m, &k_.gemm->n, &k_.gemm->k, &k_.gemm->lda, &k_.gemm->ldb,
                               &k_.gemm->ldd, &k_.gemm->stride_a, &k_.gemm->stride_b, &k_.gemm->stride_d})
        mentions(*e, -1, "the gemm description");
    if (const auto& a = k_.attention) {
      for (const SymExpr* e : {&a->batch, &a->q_len, &a->kv_len}) mentions(*e, -1, "the attention description");
      for (const auto* v : {&a->q_strides, &a->k_strides, &a->v_strides, &a->dout_strides, &a->aux_strides,
                              &a->dv_strides})
        for (const SymExpr& e : *v) mentions(e, -1, "the attention description");
      for (const SymExpr& e : a->mask_strides) mentions(e, -1, "the attention description");
      for (const SymExpr* e : {&a->q_offset, &a->k_offset, &a->v_offset}) mentions(*e, -1, "the attention description");
    }
    if (k_.conv) {
      for (const SymExpr* e : {&k_.conv->n, &k_.conv->c, &k_.conv->k}) mentions(*e, -1, "the conv description");
      for (const std::vector<SymExpr>* v : {&k_.conv->in, &k_.conv->out})
        for (const SymExpr& e : *v) mentions(e, -1, "the conv description");
    }
  }

  const Kernel& k_;
  size_t rank_;
};

}  // namespace

std::optional<KernelProblem> verify_kernel(const Kernel& k) {
  try {
    Verifier(k).run();
  } catch (const KernelProblem& p) {
    return p;
  }
  return std::nullopt;
}

}  // namespace tcc::kir
