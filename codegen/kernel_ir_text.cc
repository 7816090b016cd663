// The kernel IR's parser: a recursive descent over the lines print_kernel
// writes, on the character-level reading the graph IR's parser uses
// (src/ir/text_cursor.h). Line breaks are not significant; an instruction's
// operands end where the next `%N:` or `%N =` starts.
#include "codegen/kernel_ir_text.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>

#include "codegen/kernel_ir_verify.h"
#include "src/diag/errors.h"
#include "src/ir/text_cursor.h"

namespace tcc::kir {

namespace {

constexpr Kind kKinds[] = {Kind::Pointwise, Kind::Reduction, Kind::Gemm,      Kind::Conv,
                           Kind::Attention, Kind::TopK,      Kind::Recurrence, Kind::Nms,
                           Kind::RoiAlign};

// Stops of an expression: it never holds a space, and lists and the domain end it.
constexpr const char* kExprStops = " \t\r,]|";

class KernelParser : TextCursor {
 public:
  using TextCursor::TextCursor;

  std::vector<Kernel> kernels() {
    std::vector<Kernel> out;
    do {
      size_t at = pos();
      out.push_back(kernel());
      // One translation unit holds them all: their symbols must differ.
      for (size_t i = 0; i + 1 < out.size(); ++i)
        if (out[i].name == out.back().name) fail_at(at, "kernel '" + out.back().name + "' is already defined");
    } while (pos() < t_.size());
    return out;
  }

 private:
  Kernel kernel() {
    size_t start = pos();
    expect_keyword("kernel");
    Kernel k;
    k.name = name("a kernel name");
    k.kind = kind();
    expect_keyword("domain");
    domain(k);
    if (keyword("sizes")) {
      expect("(");
      do k.size_params.push_back(ident("a size parameter"));
      while (accept(","));
      expect(")");
    }
    if (keyword("nodes")) {
      do k.nodes.push_back(name("a node name"));
      while (accept(","));
    }
    while (keyword("buffer")) buffer(k);
    if (keyword("outputs")) {
      if (keyword("copied")) {
        expect_keyword("from");
        k.copy_from = buffer_ref(k, false);
      } else {
        expect_keyword("zeroed");
        k.zero_outputs = true;
      }
      expect_keyword("first");
    }
    if (keyword("gemm")) k.gemm = gemm(k);
    if (keyword("conv")) k.conv = conv(k);
    if (keyword("attention")) k.attention = attention(k);
    if (keyword("topk")) k.topk = topk(k);
    if (keyword("recurrence")) k.recurrence = recurrence(k);
    if (keyword("nms")) k.nms = nms(k);
    if (keyword("roi_align")) k.roi_align = roi_align(k);
    if (keyword("schedule")) k.schedule = schedule();
    std::vector<size_t> instr_at;
    while (peek() == '%') {
      instr_at.push_back(pos());
      k.body.push_back(instr(k));
    }
    if (pos() < t_.size() && peek_ident() != "kernel") expected("an instruction ('%N') or the next 'kernel'");
    if (std::optional<KernelProblem> p = verify_kernel(k))
      fail_at(p->instr >= 0 ? instr_at[static_cast<size_t>(p->instr)] : start, p->message);
    return k;
  }

  Kind kind() {
    size_t at = pos();
    std::string id =
        ident("a kernel kind (pointwise, reduction, gemm, conv, attention, topk, recurrence, nms, roi_align)");
    for (Kind kind : kKinds)
      if (id == kind_name(kind)) return kind;
    fail_at(at,
            "expected a kernel kind (pointwise, reduction, gemm, conv, attention, topk, recurrence, nms, roi_align), "
            "got '" + id + "'");
  }

  SymExpr expr(const std::string& what) {
    size_t at = pos();
    std::string text = expr_text(kExprStops);
    if (text.empty()) expected(what);
    std::string why = expr_text_problem(text);
    std::optional<SymExpr> e = why.empty() ? SymExpr::parse(text) : std::nullopt;
    if (!e) fail_at(at, "expected " + what + ", got '" + text.substr(0, 40) + "'" + why);
    return *e;
  }

  // expr (',' expr)*, or nothing where the next character is one of `ends`.
  std::vector<SymExpr> exprs(const char* ends) {
    std::vector<SymExpr> out;
    char c = peek();
    if (c != '\0' && std::strchr(ends, c) != nullptr) return out;
    do out.push_back(expr("an expression"));
    while (accept(","));
    return out;
  }

  void domain(Kernel& k) {
    expect("[");
    k.domain = exprs("|]");
    size_t bar = pos();
    if (accept("|")) {
      if (k.kind != Kind::Reduction) fail_at(bar, "only a reduction kernel's domain has a '|'");
      std::vector<SymExpr> reduced = exprs("]");
      k.reduce_axes = static_cast<int>(reduced.size());
      k.domain.insert(k.domain.end(), reduced.begin(), reduced.end());
    } else if (k.kind == Kind::Reduction) {
      expected("'|' between a reduction's outer and reduced axes");
    }
    expect("]");
  }

  DType dtype() {
    size_t at = pos();
    std::string id = ident("a dtype");
    std::optional<DType> t = parse_dtype(id);
    if (!t) fail_at(at, "expected a dtype (f32 f16 bf16 f64 f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f4e2m1 i64 i32 i16 i8 i4 u8 u16 u32 u64 u4 bool), got '" + id + "'");
    return *t;
  }

  void buffer(Kernel& k) {
    size_t at = pos();
    Buffer b;
    b.name = name("a buffer name");
    for (const Buffer& other : k.buffers)
      if (other.name == b.name) fail_at(at, "buffer '" + b.name + "' is already declared");
    expect(":");
    b.dtype = dtype();
    expect("[");
    b.shape = exprs("]");
    expect("]");
    size_t dir = pos();
    std::string io = ident("'in' or 'out'");
    if (io != "in" && io != "out") fail_at(dir, "expected 'in' or 'out', got '" + io + "'");
    b.output = io == "out";
    k.buffers.push_back(std::move(b));
  }

  // A declared buffer's name, or (unquoted) -1 for none where `optional`.
  int buffer_ref(const Kernel& k, bool optional) {
    size_t at = pos();
    bool quoted = peek() == '"';
    std::string n = name("a buffer name");
    if (optional && !quoted && n == "-1") return -1;
    for (size_t b = 0; b < k.buffers.size(); ++b)
      if (k.buffers[b].name == n) return static_cast<int>(b);
    fail_at(at, "undefined buffer '" + n + "' (buffers are declared before the instructions)");
  }

  // `key=`, the start of a descriptor field.
  void field(const char* key) {
    expect_keyword(key);
    expect("=");
  }

  int64_t integer() {
    size_t at = pos();
    return int_value(number(), at);
  }

  bool flag() {
    size_t at = pos();
    int64_t v = integer();
    if (v != 0 && v != 1) fail_at(at, "expected 0 or 1, got " + std::to_string(v));
    return v == 1;
  }

  double real() { return std::strtod(number().text.c_str(), nullptr); }

  std::vector<int64_t> integers() {
    std::vector<int64_t> out;
    expect("[");
    if (accept("]")) return out;
    do out.push_back(integer());
    while (accept(","));
    expect("]");
    return out;
  }

  std::vector<SymExpr> expr_list() {
    expect("[");
    std::vector<SymExpr> out = exprs("]");
    expect("]");
    return out;
  }

  GemmDesc gemm(const Kernel& k) {
    GemmDesc g;
    field("a");
    g.a = buffer_ref(k, false);
    field("b");
    g.b = buffer_ref(k, false);
    field("trans_a");
    g.trans_a = flag();
    field("trans_b");
    g.trans_b = flag();
    using Field = std::pair<const char*, SymExpr*>;
    for (auto [key, e] : std::initializer_list<Field>{{"batch", &g.batch}, {"m", &g.m}, {"n", &g.n}, {"k", &g.k},
                                                       {"lda", &g.lda}, {"ldb", &g.ldb}, {"ldd", &g.ldd},
                                                       {"stride_a", &g.stride_a}, {"stride_b", &g.stride_b},
                                                       {"stride_d", &g.stride_d}}) {
      field(key);
      *e = expr("an expression");
    }
    field("alpha");
    g.alpha = real();
    field("beta");
    g.beta = real();
    field("bias");
    g.bias = buffer_ref(k, true);
    field("residual");
    g.residual = buffer_ref(k, true);
    field("activation");
    g.activation = ident("an activation");
    return g;
  }

  ConvDesc conv(const Kernel& k) {
    ConvDesc c;
    field("x");
    c.x = buffer_ref(k, false);
    field("w");
    c.w = buffer_ref(k, false);
    field("n");
    c.n = expr("an expression");
    field("c");
    c.c = expr("an expression");
    field("k");
    c.k = expr("an expression");
    field("in");
    c.in = expr_list();
    field("out");
    c.out = expr_list();
    field("kernel");
    c.kernel = integers();
    field("strides");
    c.strides = integers();
    field("dilations");
    c.dilations = integers();
    field("pads");
    c.pads = integers();
    field("groups");
    c.groups = integer();
    field("bias");
    c.bias = buffer_ref(k, true);
    field("residual");
    c.residual = buffer_ref(k, true);
    field("activation");
    c.activation = ident("an activation");
    return c;
  }

  // `[e, e, ...]` of exactly N expressions.
  template <size_t N>
  std::array<SymExpr, N> fixed_exprs(const char* what) {
    size_t at = pos();
    std::vector<SymExpr> v = expr_list();
    if (v.size() != N) fail_at(at, "expected " + std::to_string(N) + " " + what + ", got " + std::to_string(v.size()));
    std::array<SymExpr, N> out;
    std::copy(v.begin(), v.end(), out.begin());
    return out;
  }

  AttentionDesc attention(const Kernel& k) {
    AttentionDesc a;
    // -1 in the statistics pass, which the verifier checks.
    field("q");
    a.q = buffer_ref(k, true);
    field("k");
    a.k = buffer_ref(k, true);
    field("v");
    a.v = buffer_ref(k, true);
    field("mask");
    a.mask = buffer_ref(k, true);
    for (auto [key, n] : std::initializer_list<std::pair<const char*, int64_t*>>{
             {"heads", &a.heads}, {"kv_heads", &a.kv_heads}, {"head_size", &a.head_size}, {"v_head_size", &a.v_head_size}}) {
      field(key);
      *n = integer();
    }
    for (auto [key, e] : std::initializer_list<std::pair<const char*, SymExpr*>>{
             {"batch", &a.batch}, {"q_len", &a.q_len}, {"kv_len", &a.kv_len}}) {
      field(key);
      *e = expr("an expression");
    }
    field("q_strides");
    a.q_strides = fixed_exprs<3>("strides (batch, head, row)");
    field("k_strides");
    a.k_strides = fixed_exprs<3>("strides (batch, head, row)");
    field("v_strides");
    a.v_strides = fixed_exprs<3>("strides (batch, head, row)");
    field("mask_strides");
    a.mask_strides = fixed_exprs<4>("strides (batch, head, query row, key)");
    field("scale");
    a.scale = real();
    field("softcap");
    a.softcap = real();
    field("causal");
    a.causal = flag();
    if (keyword("tf32")) {
      expect("=");
      a.tf32 = flag();
    }
    if (keyword("offsets")) {
      expect("=");
      const std::array<SymExpr, 3> o = fixed_exprs<3>("offsets (q, k, v)");
      a.q_offset = o[0], a.k_offset = o[1], a.v_offset = o[2];
    }
    if (keyword("lse")) {
      expect("=");
      a.lse = buffer_ref(k, false);
    }
    if (!keyword("pass")) return a;
    expect("=");
    size_t at = pos();
    const std::string name = ident("an attention pass");
    for (AttentionPass p : {AttentionPass::Stats, AttentionPass::GradQ, AttentionPass::GradK, AttentionPass::GradV,
                            AttentionPass::GradKV})
      if (name == attention_pass_name(p)) a.pass = p;
    if (a.pass == AttentionPass::Forward)
      fail_at(at, "expected an attention pass (stats, grad_q, grad_k, grad_v, grad_kv), got '" + name + "'");
    field("dout");
    a.dout = buffer_ref(k, false);
    field("aux");
    a.aux = buffer_ref(k, false);
    field("dout_strides");
    a.dout_strides = fixed_exprs<3>("strides (batch, head, row)");
    field("aux_strides");
    a.aux_strides = fixed_exprs<3>("strides (batch, head, row)");
    if (a.pass != AttentionPass::GradKV) return a;
    field("dv");
    a.dv = buffer_ref(k, false);
    field("dv_strides");
    a.dv_strides = fixed_exprs<3>("strides (batch, head, row)");
    return a;
  }

  TopKDesc topk(const Kernel& k) {
    TopKDesc t;
    field("x");
    t.x = buffer_ref(k, false);
    field("length");
    t.length = integer();
    field("largest");
    t.largest = flag();
    return t;
  }

  // `key=value` knobs (schedule_knobs) up to the first instruction or the
  // next kernel, each at most once; the others keep KernelConfig's defaults.
  KernelConfig schedule() {
    KernelConfig c;
    std::vector<std::string> seen;
    while (pos() < t_.size() && peek() != '%' && peek_ident() != "kernel") {
      size_t at = pos();
      std::string key = ident("a schedule knob");
      const ScheduleKnob* knob = nullptr;
      std::string known;
      for (const ScheduleKnob& s : schedule_knobs()) {
        if (key == s.name) knob = &s;
        known += (known.empty() ? "" : " ") + std::string(s.name);
      }
      if (knob == nullptr) fail_at(at, "expected a schedule knob (" + known + "), got '" + key + "'");
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail_at(at, "schedule knob '" + key + "' is given twice");
      seen.push_back(key);
      expect("=");
      if (knob->flag) {
        c.*knob->flag = flag();
      } else {
        size_t value_at = pos();
        int64_t v = integer();
        if (v < 0 || v > INT_MAX) fail_at(value_at, "expected a schedule value from 0 to " + std::to_string(INT_MAX));
        c.*knob->number = static_cast<int>(v);
      }
    }
    return c;
  }

  NmsDesc nms(const Kernel& k) {
    NmsDesc n;
    field("center");
    n.center = flag();
    field("boxes");
    n.boxes = expr("an expression");
    for (const auto& [key, b] : nms_buffers(n)) {
      field(key);
      *b = buffer_ref(k, true);
    }
    return n;
  }

  RoiAlignDesc roi_align(const Kernel& k) {
    RoiAlignDesc r;
    field("max");
    r.max = flag();
    field("half_pixel");
    r.half_pixel = flag();
    field("sampling_ratio");
    r.sampling_ratio = integer();
    field("spatial_scale");
    r.spatial_scale = real();
    for (const auto& [key, b] : roi_align_buffers(r)) {
      field(key);
      *b = buffer_ref(k, false);
    }
    return r;
  }

  RecurrenceDesc recurrence(const Kernel& k) {
    RecurrenceDesc r;
    field("cell");
    size_t at = pos();
    const std::string cell = ident("a cell (rnn, gru, lstm)");
    bool known = false;
    for (RecurrentCell c : {RecurrentCell::Rnn, RecurrentCell::Gru, RecurrentCell::Lstm})
      if (cell == recurrent_cell_name(c)) r.cell = c, known = true;
    if (!known) fail_at(at, "expected a cell (rnn, gru, lstm), got '" + cell + "'");
    field("directions");
    r.directions = integer();
    field("hidden");
    r.hidden = integer();
    field("reverse");
    r.reverse = flag();
    field("clip");
    r.clip = real();
    field("linear_before_reset");
    r.linear_before_reset = flag();
    field("input_forget");
    r.input_forget = flag();
    field("seq");
    r.seq = expr("an expression");
    field("batch");
    r.batch = expr("an expression");
    for (const auto& [key, b] : recurrence_buffers(r)) {
      field(key);
      *b = buffer_ref(k, true);
    }
    return r;
  }

  // A number that fits an int and is not negative: an instruction's or an axis's.
  int index(const char* what) {
    size_t at = pos();
    int64_t v = integer();
    if (v < 0 || v > INT_MAX) fail_at(at, std::string("expected ") + what + ", got " + std::to_string(v));
    return static_cast<int>(v);
  }

  // `%N`: an instruction number.
  int instr_ref() {
    expect("%");
    return index("an instruction number");
  }

  // Whether an operand follows: a `%N` that does not start the next instruction.
  bool operand_next() {
    if (peek() != '%') return false;
    size_t saved = p_;
    instr_ref();
    bool defines = peek() == ':' || peek() == '=' || peek_ident() == "row";
    p_ = saved;
    return !defines;
  }

  Instr instr(const Kernel& k) {
    size_t at = pos();
    int number = instr_ref();
    if (number != static_cast<int>(k.body.size()))
      fail_at(at, "expected %" + std::to_string(k.body.size()) + " (instructions are numbered in order), got %" +
                      std::to_string(number));
    Instr in;
    bool typed = accept(":");
    if (typed) in.dtype = dtype();
    in.row = keyword("row");
    expect("=");
    size_t op_at = pos();
    std::string op = ident("an op");
    std::optional<Op> o = op_by_name(op);
    if (!o) fail_at(op_at, "expected an op (docs/KERNEL_IR.md lists them), got '" + op + "'");
    in.op = *o;
    if (typed == (in.op == Op::Store))
      fail_at(at, in.op == Op::Store ? "a store has no dtype ('%N = store ...')" : "expected ': DTYPE' after %N");
    if (in.op == Op::Load || in.op == Op::Store) {
      access(k, in);
      while (accept(",")) in.args.push_back(instr_ref());
    } else {
      if (in.op == Op::Const) in.value = real();
      else if (in.op == Op::SizeValue) in.size = expr("a size expression");
      else if (in.op == Op::Coord) in.axis = index("an axis");
      else if (in.op == Op::RecurrenceArg || in.op == Op::RecurrenceResult) in.axis = index("an activation");
      if (operand_next()) {
        do in.args.push_back(instr_ref());
        while (accept(","));
      }
    }
    if (in.op == Op::Store && !in.args.empty() && in.args[0] >= 0 && in.args[0] < number)
      in.dtype = k.body[static_cast<size_t>(in.args[0])].dtype;
    return in;
  }

  // BUFFER '[' strides ']' ['+' offset] ['+' '%'N '*' stride] ['add' | 'mul' | 'max' | 'min']
  void access(const Kernel& k, Instr& in) {
    in.buffer = buffer_ref(k, false);
    in.index.strides = expr_list();
    bool plus = accept("+");
    if (plus && peek() != '%') {
      in.index.offset = expr("an offset");
      plus = accept("+");
    }
    if (plus) {
      in.dynamic = instr_ref();
      expect("*");
      in.dynamic_stride = expr("a stride");
    }
    for (Accumulate a : {Accumulate::Add, Accumulate::Mul, Accumulate::Max, Accumulate::Min})
      if (in.accumulate == Accumulate::None && keyword(accumulate_name(a))) in.accumulate = a;
  }
};

}  // namespace

std::optional<Op> op_by_name(std::string_view name) {
  static const std::map<std::string, Op, std::less<>> ops = [] {
    std::map<std::string, Op, std::less<>> m;
    // Op::RecurrenceResult is the last op of kernel_ir.h's list.
    for (int o = static_cast<int>(Op::Load); o <= static_cast<int>(Op::RecurrenceResult); ++o)
      m.emplace(op_name(static_cast<Op>(o)), static_cast<Op>(o));
    return m;
  }();
  auto it = ops.find(name);
  if (it == ops.end()) return std::nullopt;
  return it->second;
}

std::vector<Kernel> parse_kernels(const std::string& text, const std::string& file) {
  return KernelParser(text, file).kernels();
}

std::string print_kernels(const std::vector<Kernel>& kernels) {
  std::string out;
  for (const Kernel& k : kernels) out += print_kernel(k);
  return out;
}

}  // namespace tcc::kir
