// Loads a model from disk in either of tcc's input formats: ONNX protobuf or
// tcc's textual IR (recognized by its first keyword), then verifies it.
#pragma once

#include <memory>
#include <string>

#include "src/ir/graph.h"

namespace tcc {

std::unique_ptr<Model> load_model(const std::string& path);

}  // namespace tcc
