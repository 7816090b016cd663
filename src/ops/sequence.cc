// Sequences and optionals: SequenceConstruct, SequenceEmpty, SequenceAt,
// SequenceInsert, SequenceErase, SequenceLength, ConcatFromSequence,
// SplitToSequence, SequenceMap, Optional, OptionalHasElement,
// OptionalGetElement.
//
// Their values are seq<T> and opt<T> (src/ir/type.h), which the interpreter
// carries as Tensors of kind Sequence and Optional (src/ir/tensor.h). A
// sequence's elements may differ in shape, so its element type keeps only
// the dims every element shares; the rest are unknown.
//
// A compiled module carries tensors only, so its sequences take the structure
// torch.export gives a list of tensors: fixed when compiling. A sequence is
// known where a SequenceConstruct (its elements) or a SequenceEmpty produces
// it, an optional where an Optional does (a value or none); compile writes a
// sequence or optional input so (src/compiler/structured_io.h). The other
// ops decompose over known structure into those forms or into tensor ops
// (`tcc ops` says kernel), and decompose repeats, so a chain resolves from
// its inputs: SequenceInsert / SequenceErase at a constant position into a
// SequenceConstruct, SequenceAt at one into the element itself,
// SequenceLength into a constant, ConcatFromSequence into a Concat (of
// Unsqueezes with new_axis), SplitToSequence of a static piece count into
// Slices, SequenceMap into its body copied per element, OptionalHasElement
// into a constant and OptionalGetElement into the value; a Loop whose trip
// count SequenceLength gives unrolls over them (control_flow.cc). Where a
// length or a position depends on the data the node stays a host step.
#include <algorithm>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// The element type of a sequence holding elements of types a and b: their
// shared dims stay, others become unknown. Differing dtypes fail naming the node.
Type join_elements(const InferContext& ctx, const Type& a, const Type& b) {
  if (a.is_unknown() || b.is_unknown()) return a.is_unknown() ? b : a;
  if (!a.is_tensor() || !b.is_tensor()) ctx.fail("expected tensor elements, got " + a.str() + " and " + b.str());
  if (a.dtype() != b.dtype())
    ctx.fail("expected elements of one element type, got " + a.str() + " and " + b.str());
  if (!a.has_rank() || !b.has_rank() || a.rank() != b.rank()) return Type::tensor_unranked(a.dtype());
  Dims d = a.shape();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != b.shape()[i]) d[i] = Dim::unknown();
  return Type::tensor(a.dtype(), d);
}

// The element type of sequence input i: unknown where its type is, a failure
// naming the node where it is no sequence.
Type sequence_element(const InferContext& ctx, size_t i) {
  const Type& t = ctx.input_type(i);
  if (t.is_unknown()) return Type();
  if (t.kind() != Type::Kind::Sequence)
    ctx.fail("input " + std::to_string(i) + " ('" + ctx.node().input(i)->name() + "') must be a sequence, got " +
             t.str());
  return t.elem();
}

// Input i of a kernel as a sequence; fails naming the node otherwise.
const Tensor& sequence_input(const EvalContext& ctx, size_t i) {
  const Tensor& t = ctx.input(i);
  if (!t.is_sequence()) ctx.fail("input " + std::to_string(i) + " must be a sequence");
  return t;
}

// Input i of a kernel as a tensor; fails naming the node otherwise.
const Tensor& tensor_input(const EvalContext& ctx, size_t i) {
  const Tensor& t = ctx.input(i);
  if (t.kind() != Tensor::Kind::Tensor) ctx.fail("input " + std::to_string(i) + " must be a tensor");
  return t;
}

// Fails unless input i, where its type is known, is a scalar integer (a
// position), or a one-element 1-D tensor as ONNX's own opset-12 node tests
// feed it (position() reads either).
void require_position(InferContext& ctx, size_t i) {
  const Type& t = ctx.input_type(i);
  if (!ctx.has_input(i) || !t.is_tensor()) return;
  const bool one_element = t.has_rank() && t.rank() == 1 && t.shape()[0].is_static() && t.shape()[0].value() == 1;
  if ((t.dtype() != DType::I32 && t.dtype() != DType::I64) || (t.has_rank() && t.rank() != 0 && !one_element))
    ctx.fail("position must be an int32 or int64 scalar, got " + t.str());
}

// A position in a sequence of `n` elements: negative counts from the end, and
// [-n, n - 1] are valid (insertion also takes n, the end).
int64_t position(const EvalContext& ctx, size_t input, int64_t n, bool insertion) {
  const Tensor& p = tensor_input(ctx, input);
  if (p.numel() != 1) ctx.fail("position must be a scalar, got shape " + shape_str(p.shape()));
  int64_t pos = p.get_i64(0);
  int64_t hi = insertion ? n : n - 1;
  if (pos < -n || pos > hi)
    ctx.fail("position " + std::to_string(pos) + " is outside [" + std::to_string(-n) + ", " + std::to_string(hi) +
             "] for a sequence of " + std::to_string(n) + " elements");
  return pos < 0 ? pos + n : pos;
}

// ---- SequenceConstruct, SequenceEmpty -----------------------------------------

void infer_sequence_construct(InferContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail("needs at least one tensor");
  Type elem;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    if (!t.is_unknown() && !t.is_tensor()) ctx.fail("input " + std::to_string(i) + " must be a tensor, got " + t.str());
    elem = join_elements(ctx, elem, t);
  }
  ctx.set_output_type(0, Type::sequence(elem));
}

std::vector<Tensor> eval_sequence_construct(EvalContext& ctx) {
  std::vector<Tensor> elems;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    elems.push_back(tensor_input(ctx, i));
    if (elems.back().dtype() != elems.front().dtype()) ctx.fail("needs tensors of one element type");
  }
  return {Tensor::sequence(elems.front().dtype(), elems)};
}

void infer_sequence_empty(InferContext& ctx) {
  ctx.set_output_type(0, Type::sequence(Type::tensor_unranked(dtype_attr(ctx.node(), DType::F32))));
}

std::vector<Tensor> eval_sequence_empty(EvalContext& ctx) {
  return {Tensor::sequence(dtype_attr(ctx.node(), DType::F32), {})};
}

// ---- SequenceAt, SequenceInsert, SequenceErase, SequenceLength -----------------

void infer_sequence_at(InferContext& ctx) {
  require_position(ctx, 1);
  ctx.set_output_type(0, sequence_element(ctx, 0));
}

std::vector<Tensor> eval_sequence_at(EvalContext& ctx) {
  const std::vector<Tensor>& elems = sequence_input(ctx, 0).elements();
  return {elems[position(ctx, 1, static_cast<int64_t>(elems.size()), false)]};
}

void infer_sequence_insert(InferContext& ctx) {
  require_position(ctx, 2);
  Type elem = sequence_element(ctx, 0);
  const Type& t = ctx.input_type(1);
  if (!t.is_unknown() && !t.is_tensor()) ctx.fail("input 1 must be a tensor, got " + t.str());
  ctx.set_output_type(0, Type::sequence(join_elements(ctx, elem, t)));
}

std::vector<Tensor> eval_sequence_insert(EvalContext& ctx) {
  const Tensor& seq = sequence_input(ctx, 0);
  const Tensor& t = tensor_input(ctx, 1);
  if (t.dtype() != seq.dtype())
    ctx.fail("cannot insert a " + std::string(dtype_name(t.dtype())) + " tensor into a sequence of " +
             std::string(dtype_name(seq.dtype())));
  std::vector<Tensor> elems = seq.elements();
  int64_t n = static_cast<int64_t>(elems.size());
  int64_t at = ctx.has_input(2) ? position(ctx, 2, n, true) : n;
  elems.insert(elems.begin() + at, t);
  return {Tensor::sequence(seq.dtype(), std::move(elems))};
}

void infer_sequence_erase(InferContext& ctx) {
  require_position(ctx, 1);
  ctx.set_output_type(0, Type::sequence(sequence_element(ctx, 0)));
}

std::vector<Tensor> eval_sequence_erase(EvalContext& ctx) {
  const Tensor& seq = sequence_input(ctx, 0);
  std::vector<Tensor> elems = seq.elements();
  int64_t n = static_cast<int64_t>(elems.size());
  if (n == 0) ctx.fail("cannot erase from an empty sequence");
  int64_t at = ctx.has_input(1) ? position(ctx, 1, n, false) : n - 1;
  elems.erase(elems.begin() + at);
  return {Tensor::sequence(seq.dtype(), std::move(elems))};
}

void infer_sequence_length(InferContext& ctx) {
  sequence_element(ctx, 0);
  ctx.set_output_type(0, Type::tensor(DType::I64, {}));
}

std::vector<Tensor> eval_sequence_length(EvalContext& ctx) {
  return {Tensor::scalar_i64(static_cast<int64_t>(sequence_input(ctx, 0).elements().size()))};
}

// ---- ConcatFromSequence, SplitToSequence -----------------------------------------

void infer_concat_from_sequence(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!n.has_attr("axis")) ctx.fail("needs an 'axis' attribute");
  bool new_axis = n.get_int("new_axis", 0) != 0;
  Type elem = sequence_element(ctx, 0);
  if (!elem.is_tensor() || !elem.has_rank()) {
    ctx.set_output_type(0, elem.is_tensor() ? Type::tensor_unranked(elem.dtype()) : Type());
    return;
  }
  int64_t rank = static_cast<int64_t>(elem.rank()) + (new_axis ? 1 : 0);
  if (rank == 0) ctx.fail("cannot concatenate rank-0 tensors without new_axis=1");
  int64_t axis = normalize_axis(n, n.get_int("axis", 0), rank);
  Dims d = elem.shape();
  if (new_axis) d.insert(d.begin() + axis, Dim::unknown());
  d[axis] = Dim::unknown();  // a sum over the elements, whose count is known at run time only
  ctx.set_output_type(0, Type::tensor(elem.dtype(), d));
}

std::vector<Tensor> eval_concat_from_sequence(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& seq = sequence_input(ctx, 0);
  if (seq.elements().empty()) ctx.fail("cannot concatenate an empty sequence");
  bool new_axis = n.get_int("new_axis", 0) != 0;
  const std::vector<int64_t>& first = seq.elements().front().shape();
  int64_t rank = static_cast<int64_t>(first.size()) + (new_axis ? 1 : 0);
  if (rank == 0) ctx.fail("cannot concatenate rank-0 tensors without new_axis=1");
  int64_t axis = normalize_axis(n, n.get_int("axis", 0), rank);
  std::vector<Tensor> parts;
  for (const Tensor& e : seq.elements()) {
    std::vector<int64_t> shape = e.shape();
    if (new_axis) shape.insert(shape.begin() + axis, 1);
    parts.push_back(e.reshaped(shape));
  }
  std::vector<int64_t> out_shape = parts.front().shape();
  out_shape[axis] = 0;
  for (const Tensor& p : parts) {
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && p.shape()[k] != parts.front().shape()[k])
        ctx.fail("elements of shapes " + shape_str(first) + " and " + shape_str(p.shape()) +
                 " do not concatenate along axis " + std::to_string(axis));
    out_shape[axis] += p.shape()[axis];
  }
  Tensor out(seq.dtype(), out_shape);
  std::vector<int64_t> strides = row_major_strides(out_shape);
  int64_t offset = 0;
  for (const Tensor& p : parts) {
    std::vector<int64_t> idx(p.rank(), 0);
    for (int64_t j = 0; j < p.numel(); ++j) {
      std::vector<int64_t> at = idx;
      at[axis] += offset;
      copy_element(out, flat_index(at, strides), p, j);
      advance(idx, p.shape());
    }
    offset += p.shape()[axis];
  }
  return {out};
}

void infer_split_to_sequence(InferContext& ctx) {
  const Node& n = ctx.node();
  const Type& x = ctx.input_type(0);
  if (!x.is_unknown() && !x.is_tensor()) ctx.fail("input 0 must be a tensor, got " + x.str());
  if (!x.is_tensor() || !x.has_rank()) {
    ctx.set_output_type(0, Type::sequence(x.is_tensor() ? Type::tensor_unranked(x.dtype()) : Type()));
    return;
  }
  if (x.rank() == 0) ctx.fail("cannot split a rank-0 tensor: it has no axis");
  int64_t axis = normalize_axis(n, n.get_int("axis", 0), static_cast<int64_t>(x.rank()));
  Dims d = x.shape();
  if (!ctx.has_input(1)) {
    if (n.get_int("keepdims", 1) != 0) d[axis] = Dim(1);
    else d.erase(d.begin() + axis);
    ctx.set_output_type(0, Type::sequence(Type::tensor(x.dtype(), d)));
    return;
  }
  const Type& split = ctx.input_type(1);
  if (split.is_tensor() && ((split.dtype() != DType::I32 && split.dtype() != DType::I64) ||
                            (split.has_rank() && split.rank() > 1)))
    ctx.fail("split must be an int32 or int64 scalar or 1-D tensor, got " + split.str());
  // Equal chunks keep their length; a scalar split's last chunk may be shorter.
  std::optional<std::vector<int64_t>> sizes = static_values(ctx.input_values(1));
  bool scalar = split.has_rank() && split.rank() == 0;
  bool equal = sizes && !sizes->empty() && std::all_of(sizes->begin(), sizes->end(), [&](int64_t s) {
    return s == sizes->front();
  });
  bool divides = !scalar || (d[axis].is_static() && sizes && sizes->front() > 0 && d[axis].value() % sizes->front() == 0);
  d[axis] = equal && divides ? Dim(sizes->front()) : Dim::unknown();
  ctx.set_output_type(0, Type::sequence(Type::tensor(x.dtype(), d)));
}

std::vector<Tensor> eval_split_to_sequence(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = tensor_input(ctx, 0);
  if (x.rank() == 0) ctx.fail("cannot split a rank-0 tensor: it has no axis");
  int64_t axis = normalize_axis(n, n.get_int("axis", 0), static_cast<int64_t>(x.rank()));
  int64_t len = x.shape()[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = n.get_int("keepdims", 1) == 0;
  } else if (ctx.input(1).rank() == 0) {
    int64_t chunk = ctx.input(1).get_i64(0);
    if (chunk <= 0) ctx.fail("split must be positive, got " + std::to_string(chunk));
    for (int64_t at = 0; at < len; at += chunk) sizes.push_back(std::min(chunk, len - at));
  } else {
    sizes = ctx.input(1).to_i64_vector();
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) ctx.fail("split sizes must not be negative");
      total += s;
    }
    if (total != len)
      ctx.fail("split sizes " + shape_str(sizes) + " do not add up to the dim's size " + std::to_string(len));
  }
  std::vector<int64_t> strides = row_major_strides(x.shape());
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = x.shape();
    shape[axis] = s;
    Tensor part = remap(x, shape, [&](const std::vector<int64_t>& idx) {
      return flat_index(idx, strides) + offset * strides[axis];
    });
    if (squeeze) {
      shape.erase(shape.begin() + axis);
      part = part.reshaped(shape);
    }
    parts.push_back(part);
    offset += s;
  }
  return {Tensor::sequence(x.dtype(), std::move(parts))};
}

// ---- SequenceMap ---------------------------------------------------------------

Graph& map_body(const Node& n) {
  Graph* g = n.get_graph("body");
  if (!g) n.fail("expected a graph attribute 'body'");
  return *g;
}

// The body runs once per element of the sequences: it takes an element of each
// sequence input and each tensor input whole; each output becomes a sequence.
void infer_sequence_map(InferContext& ctx) {
  Graph& body = map_body(ctx.node());
  if (body.inputs().size() != ctx.num_inputs())
    ctx.fail("expected the body to take " + std::to_string(ctx.num_inputs()) + " inputs, got " +
             std::to_string(body.inputs().size()));
  if (body.outputs().size() != ctx.num_outputs())
    ctx.fail("expected the body to produce " + std::to_string(ctx.num_outputs()) + " outputs, got " +
             std::to_string(body.outputs().size()));
  sequence_element(ctx, 0);
  std::vector<Type> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    ins.push_back(t.kind() == Type::Kind::Sequence ? t.elem() : t);
  }
  std::vector<Type> outs = ctx.infer_region(body, ins);
  // What the body infers from one element's type may not hold for the next:
  // only static dims describe every element.
  for (size_t k = 0; k < outs.size(); ++k) {
    Type t = outs[k];
    if (t.is_tensor() && t.has_rank())
      for (Dim& d : t.mutable_shape())
        if (!d.is_static()) d = Dim::unknown();
    ctx.set_output_type(k, Type::sequence(t));
  }
}

std::vector<Tensor> eval_sequence_map(EvalContext& ctx) {
  const Graph& body = map_body(ctx.node());
  if (body.inputs().size() != ctx.num_inputs() || body.outputs().size() != ctx.num_outputs())
    ctx.fail("expected the body to take " + std::to_string(ctx.num_inputs()) + " inputs and produce " +
             std::to_string(ctx.num_outputs()) + " outputs");
  size_t len = sequence_input(ctx, 0).elements().size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).is_sequence() && ctx.input(i).elements().size() != len)
      ctx.fail("input " + std::to_string(i) + " has " + std::to_string(ctx.input(i).elements().size()) +
               " elements where input 0 has " + std::to_string(len));
  std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
  for (size_t j = 0; j < len; ++j) {
    std::vector<Tensor> ins;
    for (size_t i = 0; i < ctx.num_inputs(); ++i)
      ins.push_back(ctx.input(i).is_sequence() ? ctx.input(i).elements()[j] : ctx.input(i));
    std::vector<Tensor> r = ctx.run_region(body, ins);
    for (size_t k = 0; k < r.size(); ++k) {
      if (r[k].kind() != Tensor::Kind::Tensor) ctx.fail("body output " + std::to_string(k) + " must be a tensor");
      outs[k].push_back(r[k]);
    }
  }
  std::vector<Tensor> results;
  for (size_t k = 0; k < outs.size(); ++k) {
    // Without elements the dtype is the inferred one.
    const Type& t = ctx.node().output(k)->type();
    DType dt = !outs[k].empty() ? outs[k].front().dtype()
               : t.kind() == Type::Kind::Sequence && t.elem().is_tensor() ? t.elem().dtype()
                                                                          : DType::F32;
    for (const Tensor& e : outs[k])
      if (e.dtype() != dt) ctx.fail("body output " + std::to_string(k) + " changes its element type between elements");
    results.push_back(Tensor::sequence(dt, std::move(outs[k])));
  }
  return results;
}

// ---- Optional, OptionalHasElement, OptionalGetElement ------------------------------

// Optional(x) holds x; Optional() is none, of the type its `type` attribute
// gives (opt<type>), or else its declared output.
void infer_optional(InferContext& ctx) {
  if (!ctx.has_input(0)) {
    if (const Type* t = ctx.node().get_type("type")) ctx.set_output_type(0, Type::optional(*t));
    return;
  }
  const Type& t = ctx.input_type(0);
  if (t.kind() == Type::Kind::Optional) ctx.fail("cannot wrap an optional in an optional");
  if (!t.is_unknown()) ctx.set_output_type(0, Type::optional(t));
}

std::vector<Tensor> eval_optional(EvalContext& ctx) {
  if (ctx.has_input(0)) {
    const Tensor& x = ctx.input(0);
    if (x.is_optional()) ctx.fail("cannot wrap an optional in an optional");
    return {Tensor::optional(x.dtype(), {x})};
  }
  const Type* attr = ctx.node().get_type("type");
  const Type t = attr ? Type::optional(*attr) : ctx.node().output(0)->type();
  if (t.kind() != Type::Kind::Optional)
    ctx.fail("without an input, needs a 'type' attribute or its output declared as an optional type");
  const Type& elem = t.elem().kind() == Type::Kind::Sequence ? t.elem().elem() : t.elem();
  return {Tensor::optional(elem.is_tensor() ? elem.dtype() : DType::Undefined, {})};
}

// An absent input, or none, has no element; a tensor or sequence input is
// taken as present (ONNX allows either since opset 18).
void infer_optional_has_element(InferContext& ctx) { ctx.set_output_type(0, Type::tensor(DType::Bool, {})); }

std::vector<Tensor> eval_optional_has_element(EvalContext& ctx) {
  Tensor out(DType::Bool, {});
  if (ctx.has_input(0)) {
    const Tensor& x = ctx.input(0);
    out.set_i64(0, x.is_optional() ? !x.elements().empty() : 1);
  }
  return {out};
}

void infer_optional_get_element(InferContext& ctx) {
  const Type& t = ctx.input_type(0);
  ctx.set_output_type(0, t.kind() == Type::Kind::Optional ? t.elem() : t);
}

std::vector<Tensor> eval_optional_get_element(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!x.is_optional()) return {x};
  if (x.elements().empty()) ctx.fail("the optional input is none");
  return {x.elements().front()};
}


// ---- Decompositions over known structure --------------------------------------

// A position read from a constant (a scalar or one-element input) in a
// sequence of n elements, negative ones from the end; nullopt when it is not
// constant or out of range (the reference's failure stays on the host).
std::optional<int64_t> known_position(const Node& n, size_t input, int64_t n_elems, bool insertion) {
  if (!n.has_input(input)) return insertion ? n_elems : n_elems - 1;
  std::optional<double> pos = scalar_constant(n.input(input));
  if (!pos) return std::nullopt;
  auto p = static_cast<int64_t>(*pos);
  if (p < -n_elems || p > (insertion ? n_elems : n_elems - 1)) return std::nullopt;
  return p < 0 ? p + n_elems : p;
}

// The node's sequence output 0 as `elems`: a SequenceConstruct of them, or a
// SequenceEmpty of the element dtype.
void finish_sequence(Expansion& e, const std::vector<Value*>& elems) {
  if (!elems.empty()) {
    e.finish("", "SequenceConstruct", elems);
    return;
  }
  const Type& t = e.node().output(0)->type();
  DType dtype = t.kind() == Type::Kind::Sequence && t.elem().is_tensor() ? t.elem().dtype() : DType::F32;
  e.finish("", "SequenceEmpty", {}, {{"dtype", Attribute::of_int(static_cast<int64_t>(dtype))}});
}

// SequenceInsert(SequenceConstruct(a, b), x, 1) -> SequenceConstruct(a, x, b)
bool insert_known(Expansion& e) {
  const Node& n = e.node();
  std::optional<std::vector<Value*>> elems = known_sequence(n.input(0));
  if (!elems) return false;
  std::optional<int64_t> at = known_position(n, 2, static_cast<int64_t>(elems->size()), true);
  if (!at || n.input(1)->type().kind() != Type::Kind::Tensor) return false;
  elems->insert(elems->begin() + *at, n.input(1));
  finish_sequence(e, *elems);
  return true;
}

// SequenceErase(SequenceConstruct(a, b), 0) -> SequenceConstruct(b)
bool erase_known(Expansion& e) {
  const Node& n = e.node();
  std::optional<std::vector<Value*>> elems = known_sequence(n.input(0));
  if (!elems || elems->empty()) return false;
  std::optional<int64_t> at = known_position(n, 1, static_cast<int64_t>(elems->size()), false);
  if (!at) return false;
  elems->erase(elems->begin() + *at);
  finish_sequence(e, *elems);
  return true;
}

// SequenceAt(SequenceConstruct(a, b), -1) -> b
bool at_known(Expansion& e) {
  const Node& n = e.node();
  std::optional<std::vector<Value*>> elems = known_sequence(n.input(0));
  if (!elems || elems->empty()) return false;
  std::optional<int64_t> at = known_position(n, 1, static_cast<int64_t>(elems->size()), false);
  if (!at) return false;
  e.take_over(0, (*elems)[static_cast<size_t>(*at)]);
  return true;
}

// SequenceLength(SequenceConstruct(a, b)) -> 2
bool length_known(Expansion& e) {
  std::optional<std::vector<Value*>> elems = known_sequence(e.node().input(0));
  if (!elems) return false;
  e.take_over(0, e.constant("length", Tensor::scalar_i64(static_cast<int64_t>(elems->size()))));
  return true;
}

// ConcatFromSequence(SequenceConstruct(a, b), axis) -> Concat(a, b, axis);
// with new_axis, Concat(Unsqueeze(a, axis), Unsqueeze(b, axis), axis).
bool concat_known(Expansion& e) {
  const Node& n = e.node();
  std::optional<std::vector<Value*>> elems = known_sequence(n.input(0));
  if (!elems || elems->empty()) return false;
  const Type& first = elems->front()->type();
  if (!first.is_tensor() || !first.has_rank()) return false;
  bool new_axis = n.get_int("new_axis", 0) != 0;
  int64_t rank = static_cast<int64_t>(first.rank()) + (new_axis ? 1 : 0);
  if (rank == 0) return false;
  int64_t axis = n.get_int("axis", 0);
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  std::vector<Value*> parts = *elems;
  Value* axes = new_axis && e.onnx_opset() >= 13 ? e.i64s("axes", {axis}) : nullptr;
  if (new_axis) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const Type& t = parts[i]->type();
      if (!t.is_tensor() || !t.has_rank()) return false;
      Dims d = t.shape();
      d.insert(d.begin() + axis, Dim(1));
      std::string piece = "unsqueeze_" + std::to_string(i);
      Type ut = Type::tensor(t.dtype(), d);
      parts[i] = axes ? e.add(piece, "Unsqueeze", {parts[i], axes}, ut)
                                      : e.add(piece, "Unsqueeze", {parts[i]}, ut, {{"axes", Attribute::of_ints({axis})}});
    }
  }
  e.finish("", "Concat", parts, {{"axis", Attribute::of_int(axis)}});
  return true;
}

// SplitToSequence(x, split) of a static piece count -> SequenceConstruct of
// Slices of x along the axis (each squeezed with keepdims 0 and no split):
// no split on a static dim, a constant chunk size on one, or constant sizes.
bool split_known(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() == 0) return false;
  const auto rank = static_cast<int64_t>(x.rank());
  int64_t axis = n.get_int("axis", 0);
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  const Dim& len = x.shape()[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!n.has_input(1)) {
    if (!len.is_static()) return false;
    sizes.assign(static_cast<size_t>(len.value()), 1);
    squeeze = n.get_int("keepdims", 1) == 0;
  } else {
    std::optional<Tensor> split = constant_value(n.input(1));
    if (!split) return false;
    if (split->rank() == 0) {
      int64_t chunk = split->get_i64(0);
      if (chunk <= 0 || !len.is_static()) return false;
      for (int64_t at = 0; at < len.value(); at += chunk) sizes.push_back(std::min(chunk, len.value() - at));
    } else {
      sizes = split->to_i64_vector();
      if (std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; })) return false;
    }
  }
  std::vector<Value*> pieces;
  int64_t offset = 0;
  Value* axes = e.i64s("axes", {axis});
  for (size_t i = 0; i < sizes.size(); ++i) {
    Dims d = x.shape();
    d[static_cast<size_t>(axis)] = Dim(sizes[i]);
    std::string piece = "piece_" + std::to_string(i);
    Value* p = e.add(piece, "Slice",
                     {n.input(0), e.i64s(piece + ".start", {offset}), e.i64s(piece + ".end", {offset + sizes[i]}), axes},
                     Type::tensor(x.dtype(), d));
    if (squeeze) {
      d.erase(d.begin() + axis);
      Type st = Type::tensor(x.dtype(), d);
      p = e.onnx_opset() >= 13 ? e.add(piece + "_squeeze", "Squeeze", {p, axes}, st)
                               : e.add(piece + "_squeeze", "Squeeze", {p}, st, {{"axes", Attribute::of_ints({axis})}});
    }
    pieces.push_back(p);
    offset += sizes[i];
  }
  finish_sequence(e, pieces);
  return true;
}

// SequenceMap(SequenceConstruct(a, b), t) -> SequenceConstruct(body(a, t),
// body(b, t)) per output: the body copied once per element, where every
// sequence input is known and of one length.
bool map_known(Expansion& e) {
  const Node& n = e.node();
  const Graph* body = n.get_graph("body");
  if (!body || body->inputs().size() != n.num_inputs() || body->outputs().size() != n.num_outputs() ||
      !inlinable(e, *body, false))
    return false;
  std::vector<std::optional<std::vector<Value*>>> seqs;
  std::optional<size_t> len;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    seqs.push_back(n.input(i)->type().kind() == Type::Kind::Sequence ? known_sequence(n.input(i)) : std::nullopt);
    if (n.input(i)->type().kind() != Type::Kind::Sequence) continue;
    if (!seqs.back() || (len && *len != seqs.back()->size())) return false;
    len = seqs.back()->size();
  }
  if (!len) return false;
  std::vector<std::vector<Value*>> outs(n.num_outputs());
  for (size_t j = 0; j < *len; ++j) {
    std::map<const Value*, Value*> env;
    for (size_t i = 0; i < n.num_inputs(); ++i) env[body->inputs()[i]] = seqs[i] ? (*seqs[i])[j] : n.input(i);
    std::vector<Value*> r = inline_region(e, *body, env, "element" + std::to_string(j));
    for (size_t k = 0; k < r.size(); ++k) outs[k].push_back(r[k]);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    const Type& t = n.output(k)->type();
    if (outs[k].empty()) {
      DType dtype = t.elem().is_tensor() ? t.elem().dtype() : DType::F32;
      e.take_over(k, e.add("sequence" + std::to_string(k), "SequenceEmpty", {}, t,
                           {{"dtype", Attribute::of_int(static_cast<int64_t>(dtype))}}));
    } else {
      e.take_over(k, e.add("sequence" + std::to_string(k), "SequenceConstruct", outs[k], t));
    }
  }
  return true;
}

// OptionalHasElement(Optional(x)) -> true, of Optional() or no input -> false,
// of a tensor or sequence -> true.
bool has_element_known(Expansion& e) {
  const Node& n = e.node();
  bool present;
  if (!n.has_input(0)) {
    present = false;
  } else if (n.input(0)->type().kind() != Type::Kind::Optional) {
    present = !n.input(0)->type().is_unknown();
    if (!present) return false;
  } else {
    const Node* p = n.input(0)->producer();
    if (!p || p->op_type() != "Optional" || !p->domain().empty()) return false;
    present = p->has_input(0);
  }
  Tensor t(DType::Bool, {});
  t.set_i64(0, present ? 1 : 0);
  e.take_over(0, e.constant("has_element", std::move(t)));
  return true;
}

// OptionalGetElement(Optional(x)) -> x; of a tensor or sequence x -> x.
bool get_element_known(Expansion& e) {
  const Node& n = e.node();
  const Type& t = n.input(0)->type();
  if (t.kind() == Type::Kind::Tensor || t.kind() == Type::Kind::Sequence) {
    e.take_over(0, n.input(0));
    return true;
  }
  const Node* p = n.input(0)->producer();
  if (t.kind() != Type::Kind::Optional || !p || p->op_type() != "Optional" || !p->domain().empty() ||
      !p->has_input(0))
    return false;
  e.take_over(0, p->input(0));
  return true;
}

}  // namespace

void register_sequence_ops(OpRegistry& r) {
  r.add(OpDef{"", "SequenceConstruct", 11, kNonTensor, infer_sequence_construct, eval_sequence_construct, {}});
  r.add(OpDef{"", "SequenceEmpty", 11, kConstant | kNonTensor, infer_sequence_empty, eval_sequence_empty, {}});
  r.add(OpDef{"", "SequenceAt", 11, kNonTensor, infer_sequence_at, eval_sequence_at, {}}).decomposition(at_known);
  r.add(OpDef{"", "SequenceInsert", 11, kNonTensor, infer_sequence_insert, eval_sequence_insert, {}})
      .decomposition(insert_known);
  r.add(OpDef{"", "SequenceErase", 11, kNonTensor, infer_sequence_erase, eval_sequence_erase, {}})
      .decomposition(erase_known);
  r.add(OpDef{"", "SequenceLength", 11, kNonTensor, infer_sequence_length, eval_sequence_length, {}})
      .decomposition(length_known);
  r.add(OpDef{"", "ConcatFromSequence", 11, kMovement | kNonTensor, infer_concat_from_sequence,
              eval_concat_from_sequence, {}})
      .decomposition(concat_known);
  r.add(OpDef{"", "SplitToSequence", 11, kMovement | kNonTensor, infer_split_to_sequence, eval_split_to_sequence, {}})
      .decomposition(split_known);
  r.add(OpDef{"", "SequenceMap", 17, kControlFlow | kNonTensor, infer_sequence_map, eval_sequence_map, {}})
      .decomposition(map_known);
  r.add(OpDef{"", "Optional", 15, kNonTensor, infer_optional, eval_optional, {}});
  r.add(OpDef{"", "OptionalHasElement", 15, kNonTensor, infer_optional_has_element, eval_optional_has_element, {}})
      .decomposition(has_element_known);
  r.add(OpDef{"", "OptionalGetElement", 15, kNonTensor, infer_optional_get_element, eval_optional_get_element, {}})
      .decomposition(get_element_known);
}

}  // namespace tcc
