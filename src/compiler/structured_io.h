// Sequence and optional inputs and outputs of a compiled module, flattened as
// torch.export flattens a list of tensors: the structure is fixed when
// compiling, the tensors are the module's. `--shape-hint xs=seq(3)` compiles
// input xs for three elements, module inputs xs.0, xs.1, xs.2 (each typed as
// the model's element type says), which a SequenceConstruct assembles into
// the value the model reads; `opt=present` / `opt=absent` compile an optional
// with its value, input opt.0, or without (an optional sequence takes
// `opt=seq(N)`, inputs opt.0.0 ...). `xs.1=[4x3]` gives an element a static
// shape (`[]` a scalar), which an element type the model leaves unranked
// needs, and elements of one sequence that differ in shape too. The sequence ops then resolve over that
// structure (src/ops/sequence.cc) and passes/flatten_outputs.cc names the
// outputs' elements alike. manifest.json's structured_inputs and
// structured_outputs record both (docs/MODULE.md).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/module_writer.h"
#include "src/ir/graph.h"

namespace tcc {

// Replaces each sequence or optional input of g by its element tensors as its
// hint says; returns their structure. A sequence input without a length, an
// optional without present / absent, or a hint for no such input is an
// InputError saying what to write.
std::vector<StructuredValue> flatten_structured_inputs(Graph& g, const CompileOptions& options);

// The structure of the model's output `name` of type `type` (a sequence or
// optional) among the module's outputs `outputs`, which flatten_outputs named.
StructuredValue structured_output(const std::string& name, const Type& type, const std::vector<std::string>& outputs);

// One --shape-hint entry NAME=VALUE into `options` when it is a structure
// (seq(N), present, absent) or an element's shape ([2x3]): true; false for a size.
bool parse_structure_hint(const std::string& name, const std::string& value, CompileOptions& options);

}  // namespace tcc
