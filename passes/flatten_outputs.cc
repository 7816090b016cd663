// flatten_outputs: each main-graph output that is a sequence or optional of
// known structure becomes its element tensors, outputs named `<name>.0`,
// `<name>.1`, ... (an optional's value `<name>.0`; an element that is itself
// a sequence flattens alike, `<name>.0.0`), each an Identity of the element:
// a compiled module's outputs are tensors, as torch.export flattens a
// returned list (src/compiler/structured_io.h).
//
// Known structure: a SequenceConstruct (its inputs), a SequenceEmpty (none)
// or an Optional (its input, if any) produces the output, through Identities;
// decompose leaves sequence ops over known structure in those forms.
//
// Expects: a verified graph, after decompose. Refuses (an InputError naming
// the node) an output whose structure depends on the data: a host step
// produces it. Leaves alone: tensor outputs, and the order of the outputs
// (each structured one replaced where it stood by its elements).
#include "passes/pass.h"

namespace tcc {

namespace {

void flatten(Graph& g, const Value* v, const std::string& name, std::vector<Value*>& outs) {
  const Node* p = v->producer();
  while (p && p->op_type() == "Identity" && p->domain().empty() && !v->type().is_tensor()) {
    v = p->input(0);
    p = v->producer();
  }
  if (v->type().is_tensor()) {
    Node* id = g.add_node("Identity", {const_cast<Value*>(v)}, {name}, "", name + "/Identity");
    id->output(0)->set_type(v->type());
    if (p) id->set_source(p->source());
    outs.push_back(id->output(0));
    return;
  }
  const std::string op = p && p->domain().empty() ? p->op_type() : "";
  if (op == "SequenceConstruct" || op == "Optional") {
    for (size_t i = 0; i < p->num_inputs(); ++i)
      if (p->has_input(i)) flatten(g, p->input(i), name + "." + std::to_string(i), outs);
    return;
  }
  if (op == "SequenceEmpty") return;
  std::string what = "output '" + name + "' is of type " + v->type().str() +
                     " and its structure (length, or whether it holds a value) depends on the data";
  std::string why = "; a compiled module's outputs are tensors, so a sequence or optional output must have a "
                    "structure known when compiling";
  if (p) p->fail(what + ": this node computes it on the host" + why);
  v->fail(what + why);
}

}  // namespace

bool flatten_outputs(Graph& g, PassContext& ctx) {
  std::vector<Value*> outs;
  bool changed = false;
  for (Value* v : g.outputs()) {
    if (v->type().is_tensor() || v->type().is_unknown()) {
      outs.push_back(v);
      continue;
    }
    flatten(g, v, v->name(), outs);
    changed = true;
  }
  if (!changed) return false;
  g.set_outputs(std::move(outs));
  g.topo_sort();
  dce(g, ctx);
  ctx.stats.add("outputs_flattened");
  return true;
}

}  // namespace tcc
