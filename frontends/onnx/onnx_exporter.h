// ONNX exporter: tcc IR -> ModelProto, the inverse of onnx_importer.
//
// Nodes keep their names, domains and attributes (regions become GRAPH
// attributes); initializers are written as raw_data; every typed value gets a
// value_info, symbolic dims as dim_param in SymExpr text ("batch*seq"), which
// the importer parses back. A graph input with a default value (a training
// step's parameters and optimizer state) is an input that is also an
// initializer, ONNX's spelling of an overridable default since IR version 4.
// The opset imports are the model's, tcc's own ops in the "tcc" domain.
#pragma once

#include <string>

#include "src/ir/graph.h"

namespace tcc {

// The serialized ModelProto.
std::string export_onnx_bytes(const Model& model);
// Writes it to `path`; a file that cannot be written is an InputError naming it.
void export_onnx_file(const Model& model, const std::string& path);

}  // namespace tcc
