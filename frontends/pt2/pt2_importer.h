// torch.export .pt2 frontend: an ExportedProgram archive -> tcc IR.
//
// Reads what torch.export.save writes since torch 2.6 (schema 8): torch 2.9's
// and later's zip (the program in models/model.json, the weights raw storages
// listed in data/weights/model_weights_config.json), torch 2.8's (the same
// program, the weights and constants torch.save'd dicts in data/weights/model.pt
// and data/constants/model.pt) and 2.7's and earlier (the program in
// serialized_exported_program.json, the dicts in serialized_state_dict.pt and
// serialized_constants.pt; torch_pickle reads them), in either dialect: the training IR of torch.export.export or core ATen after
// run_decompositions(). The graph signature's parameters, buffers and tensor
// constants become initializers named by their module path
// ("blocks.0.qkv.weight"), each with its role (Value::role: the parameters are
// what --train trains, not the buffers and constants); user inputs become graph
// inputs. The model's metadata keeps the range_constraints ("pt2.range.s23" =
// "[2, 64]"); symbolic sizes keep torch's symbol names ("s23"). Each ATen op maps onto
// ONNX ops (aten_ops.cc); an op with no mapping becomes an opaque node (domain
// "aten", op type "aten.foo.default") whose outputs keep torch's types, which
// explain reports as a graph break. Each node's source is the user's stack
// frame and module path ("model.py:12 (blocks.0.attn)").
#pragma once

#include <memory>
#include <string>

#include "frontends/pt2/pt2_archive.h"
#include "src/ir/graph.h"

namespace tcc {

// True when the bytes start like a zip archive (local file header "PK\3\4").
bool looks_like_zip(const std::string& bytes);

// Reads a .pt2 archive already in memory; `path` names it in diagnostics.
// Malformed input is an InputError naming the archive, the entry or node and
// what was expected.
std::unique_ptr<Model> import_pt2_bytes(std::string bytes, const std::string& path, Pt2Limits limits = {});

}  // namespace tcc
