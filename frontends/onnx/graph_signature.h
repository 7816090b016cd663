// What torch's dynamo exporter (torch.onnx.export(..., dynamo=True)) says of
// each initializer: the exported program's graph signature, which it writes
// into the ONNX metadata. Each lifted initializer's value info carries its
// input spec's kind ("pkg.torch.export.graph_signature.InputSpec.kind":
// PARAMETER, BUFFER, ...), and the graph the signature as text
// ("pkg.torch.export.ExportedProgram.graph_signature": lines
// "p_fc_weight: PARAMETER target='fc.weight'").
//
// The exporter's optimizer rewrites some parameters on the way: a Linear's
// weight becomes its transpose (a value "val_57" whose
// "pkg.onnxscript.optimizer.folded_from" names the weight), a BatchNorm folds
// into the Conv before it (the Conv's weight keeps its name, without metadata).
// Both are still the parameters torch trains, in another layout, so they are
// parameters here; a value folded from constants only ("val_154", GELU's 0.5)
// is a constant.
#pragma once

#include <onnx/onnx_pb.h>

#include "src/ir/graph.h"

namespace tcc {

// Sets the role (Value::role) of each of g's initializers from gp's metadata:
// Parameter, Buffer or Constant where the exporter marked any initializer's
// kind; left Unmarked otherwise (the legacy exporter, hand-written models).
void mark_initializer_roles(const onnx::GraphProto& gp, Graph& g);

}  // namespace tcc
