// ONNX frontend: ModelProto -> tcc IR.
#pragma once

#include <memory>
#include <string>

#include "src/ir/graph.h"

namespace tcc {

// Reads an ONNX model file. External data is read only from files inside the
// model's folder. Malformed input is an InputError naming the file, the node
// and what was expected.
std::unique_ptr<Model> import_onnx_file(const std::string& path);
// Same, from bytes already in memory (fuzzing, tests); `path` names the source
// and its folder anchors external data (empty: external data is refused).
std::unique_ptr<Model> import_onnx_bytes(const std::string& bytes, const std::string& path);

}  // namespace tcc
