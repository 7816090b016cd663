// tcc's textual IR: a printer and a parser that round-trip exactly.
//
// It is tcc's own serialized graph format (accepted wherever an ONNX file is)
// and the language of pass tests. print_model(parse_model(t)) == t for any t
// that print_model produced. The grammar is documented in docs/TEXT_IR.md.
#pragma once

#include <memory>
#include <string>

#include "src/ir/graph.h"

namespace tcc {

std::string print_model(const Model& m);
std::string print_graph(const Graph& g);
// Parses text; `file` names the source in diagnostics. Syntax errors are
// InputErrors of the form "file:line:col: expected X, got Y" (exit 2).
std::unique_ptr<Model> parse_model(const std::string& text, const std::string& file = "<text>");

}  // namespace tcc
