// Attention kernels: a tcc::Attention or ONNX Attention node whose kernel role
// is Attention (with the log-sum-exp it saves for its backward, if read), or a
// pass of the backward (tcc::AttentionGrad; grad_kv's dK and dV), lowered to
// its AttentionDesc (lowering.h, kernel_ir.h).
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "codegen/lowering.h"
#include "src/ops/kernel_roles.h"

namespace tcc::lowering {

namespace {

// Element strides per batch, head and row of a [batch, heads, seq, size] view
// of a 4-D operand (that shape) or a 3-D one ([batch, seq, heads * size]).
std::array<SymExpr, 3> head_strides(const std::vector<SymExpr>& shape, const SymExpr& heads, const SymExpr& size) {
  if (shape.size() == 4) return {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3]};
  return {shape[1] * shape[2], size, heads * size};
}

// The value v views through movement nodes: v itself where no movement node
// produced it.
const Value* viewed(const Value* v) {
  while (v->producer() != nullptr && is_movement(*v->producer())) v = v->producer()->input(0);
  return v;
}

// The statistics pass reads dY, Y and the forward's log-sum-exp alone: its
// kernel keeps those buffers and its output, losing Q, K, V and the mask
// (where no operand it reads shares them), which its description then names
// as -1.
void drop_statistics_operands(kir::Kernel& k) {
  kir::AttentionDesc& a = *k.attention;
  std::vector<int> index(k.buffers.size(), -1);
  std::vector<kir::Buffer> kept;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const int i = static_cast<int>(b);
    if (!k.buffers[b].output && i != a.dout && i != a.aux && i != a.lse) continue;
    index[b] = static_cast<int>(kept.size());
    kept.push_back(std::move(k.buffers[b]));
  }
  k.buffers = std::move(kept);
  a.q = a.k = a.v = a.mask = -1;
  for (int* b : {&a.dout, &a.aux, &a.lse}) *b = index[static_cast<size_t>(*b)];
  for (kir::Instr& in : k.body)
    if (in.buffer >= 0) in.buffer = index[static_cast<size_t>(in.buffer)];
}

}  // namespace

std::array<SymExpr, 3> Lowering::store_strides(const Node& a, const Value* out, const SymExpr& heads,
                                               const SymExpr& size) const {
  const Value* y = a.output(0);
  if (out == y) return head_strides(shape_of(out), heads, size);
  const Node* t = out->producer();
  while (is_reshape(*t)) t = t->input(0)->producer();
  const std::vector<int64_t> perm = t->op_type() == "Transpose" ? t->get_ints("perm") : std::vector<int64_t>{};
  if (t->input(0) != y || perm.size() != 4 || perm[3] != 3)
    fail(t, "is not a Transpose of the attention's output that keeps the last axis last");
  const std::vector<SymExpr> rows = row_major(shape_of(t->output(0)));
  std::array<SymExpr, 3> strides;
  for (size_t k = 0; k < 3; ++k) strides[static_cast<size_t>(perm[k])] = rows[k];
  return strides;
}

void Lowering::setup_attention(const Node& a) {
  k_.kind = kir::Kind::Attention;
  // The output the store writes (Y or its output view, the statistics or a
  // gradient), and the forward's log-sum-exp or grad_kv's dV, which the
  // template writes.
  int y = -1, second = -1;
  for (size_t j = 0; j < body_.outputs().size(); ++j) {
    const Value* out = body_.outputs()[j];
    const int buffer = static_cast<int>(fusion_.num_inputs() + j);
    if (y < 0 && viewed(out) == a.output(0)) y = buffer;
    else if (a.num_outputs() > 1 && out == a.output(1)) second = buffer;
    else fail(&a, "is lowered only as a kernel of its own");
  }
  if (y < 0) fail(&a, "is lowered only where its first output is read");
  const std::vector<SymExpr> qs = shape_of(a.input(0)), ks = shape_of(a.input(1)), vs = shape_of(a.input(2));
  const bool four_d = qs.size() == 4;
  // A forward's 4-D Q, K and V may be views (fuse: views_attention_operand),
  // read through their strides; every other operand is a body input.
  const bool views = four_d && a.op_type() != "AttentionGrad";
  std::array<View, 3> operands;
  for (size_t i = 0; i < a.num_inputs(); ++i) {
    if (a.input(i) == nullptr || is_body_input(a.input(i))) continue;
    if (!views || i > 2) fail(&a, "an operand is not a body input");
    operands[i] = view_of(a.input(i));
    const View& v = operands[i];
    if (!(v.strides[3] == c(1) || is_one(v.shape[3])))
      fail(&a, "operand '" + a.input(i)->name() + "' is a view whose heads are not contiguous");
  }
  kir::AttentionDesc d;
  d.q = operands[0].buffer >= 0 ? operands[0].buffer : input_buffer(a.input(0));
  d.k = operands[1].buffer >= 0 ? operands[1].buffer : input_buffer(a.input(1));
  d.v = operands[2].buffer >= 0 ? operands[2].buffer : input_buffer(a.input(2));
  auto static_dim = [&](const SymExpr& e, const char* what) {
    if (!e.is_constant()) fail(&a, std::string(what) + " is not static");
    return e.constant_value();
  };
  d.heads = four_d ? static_dim(qs[1], "the head count") : a.get_int("q_num_heads", 0);
  d.kv_heads = four_d ? static_dim(ks[1], "the kv head count") : a.get_int("kv_num_heads", 0);
  if (d.heads < 1 || d.kv_heads < 1) fail(&a, "has no head counts");
  d.head_size = four_d ? static_dim(qs[3], "the head size") : static_dim(qs[2], "Q's hidden size") / d.heads;
  d.v_head_size = four_d ? static_dim(vs[3], "V's head size") : static_dim(vs[2], "V's hidden size") / d.kv_heads;
  d.batch = qs[0];
  d.q_len = qs[four_d ? 2 : 1];
  d.kv_len = ks[four_d ? 2 : 1];
  const SymExpr heads = c(d.heads), kv_heads = c(d.kv_heads);
  auto strides = [&](size_t i, const std::vector<SymExpr>& shape, const SymExpr& h, int64_t size) {
    const View& v = operands[i];
    return v.buffer >= 0 ? std::array<SymExpr, 3>{v.strides[0], v.strides[1], v.strides[2]}
                         : head_strides(shape, h, c(size));
  };
  d.q_strides = strides(0, qs, heads, d.head_size);
  d.k_strides = strides(1, ks, kv_heads, d.head_size);
  d.v_strides = strides(2, vs, kv_heads, d.v_head_size);
  d.q_offset = operands[0].offset;
  d.k_offset = operands[1].offset;
  d.v_offset = operands[2].offset;
  if (a.has_input(3)) {
    // Right-aligned onto [batch, heads, q_len, kv_len]; an axis of 1 other than the last is broadcast.
    const Value* m = a.input(3);
    d.mask = input_buffer(m);
    const std::vector<SymExpr> ms = shape_of(m), strides = row_major(ms);
    for (size_t ax = 0; ax < ms.size(); ++ax)
      if (ax + 1 == ms.size() || !is_one(ms[ax])) d.mask_strides[4 - ms.size() + ax] = strides[ax];
  }
  d.scale = a.has_attr("scale") ? a.get_float("scale", 1) : 1 / std::sqrt(static_cast<double>(d.head_size));
  d.softcap = a.get_float("softcap", 0);
  d.causal = a.get_int("is_causal", 0) != 0;

  // The output's view and layout: Y's, the statistics' or the gradient operand's.
  SymExpr rows = d.q_len, row_heads = heads;
  int64_t size = d.v_head_size;
  if (a.op_type() != "AttentionGrad") {
    d.lse = second;
  } else {
    const std::string wrt = a.get_string("wrt", "");
    d.pass = wrt == "stats" ? kir::AttentionPass::Stats
             : wrt == "q"   ? kir::AttentionPass::GradQ
             : wrt == "k"   ? kir::AttentionPass::GradK
             : wrt == "v"   ? kir::AttentionPass::GradV
                            : kir::AttentionPass::GradKV;
    d.dout = input_buffer(a.input(4));
    d.aux = input_buffer(a.input(5));
    d.dout_strides = head_strides(shape_of(a.input(4)), heads, c(d.v_head_size));
    d.aux_strides = d.pass == kir::AttentionPass::Stats ? head_strides(shape_of(a.input(5)), heads, c(d.v_head_size))
                                                        : head_strides(shape_of(a.input(5)), heads, c(2));
    if (d.pass == kir::AttentionPass::Stats) d.lse = input_buffer(a.input(6));
    if (d.pass == kir::AttentionPass::GradKV) {
      if (second < 0) fail(&a, "is lowered only where its dV is read");
      d.dv = second;
      d.dv_strides = head_strides(k_.buffers[static_cast<size_t>(second)].shape, kv_heads, c(d.v_head_size));
    }
    const bool keys = d.pass == kir::AttentionPass::GradK || d.pass == kir::AttentionPass::GradV ||
                      d.pass == kir::AttentionPass::GradKV;
    if (keys) rows = d.kv_len, row_heads = kv_heads;
    size = d.pass == kir::AttentionPass::Stats ? 2
           : d.pass == kir::AttentionPass::GradV ? d.v_head_size
                                                 : d.head_size;
  }
  // Under tf32 an f32 attention and its gradient passes may multiply in TF32; the statistics multiply nothing.
  d.tf32 = precision_ == Precision::TF32 && k_.buffers[static_cast<size_t>(d.q)].dtype == DType::F32 &&
           d.pass != kir::AttentionPass::Stats;
  k_.domain = {d.batch, row_heads, rows, c(size)};
  k_.attention = d;

  const Value* written = body_.outputs()[static_cast<size_t>(y) - fusion_.num_inputs()];
  const std::array<SymExpr, 3> y_strides = store_strides(a, written, row_heads, c(size));
  Instr st;
  st.op = Op::Store;
  st.dtype = a.output(0)->type().dtype();
  st.args = {emit(Op::AttentionAcc, st.dtype, {})};
  st.buffer = y;
  st.index.strides = {y_strides[0], y_strides[1], y_strides[2], c(1)};
  emit(std::move(st));
  if (d.pass == kir::AttentionPass::Stats) drop_statistics_operands(k_);
}

}  // namespace tcc::lowering
