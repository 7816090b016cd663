// Loads a model from disk in any of tcc's input formats: ONNX protobuf, a
// torch.export .pt2 archive (a zip) or tcc's textual IR (recognized by its
// first keyword), then verifies it.
#pragma once

#include <memory>
#include <string>

#include "src/ir/graph.h"

namespace tcc {

std::unique_ptr<Model> load_model(const std::string& path);

}  // namespace tcc
