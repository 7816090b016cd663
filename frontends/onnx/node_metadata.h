// NodeProto.metadata_props, which the importer and the exporter share: the
// field (9) is newer than the ONNX protobuf classes tcc links (1.12), so it is
// read from and written to the node's unknown fields.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <utility>
#include <vector>

namespace tcc {

// The key under which a training step's node keeps its part (Node::part): "backward" or "optimizer".
inline constexpr const char* kStepPartKey = "tcc.part";

// The node's metadata_props as (key, value) pairs, in order; entries that do not parse are skipped.
std::vector<std::pair<std::string, std::string>> node_metadata(const onnx::NodeProto& np);
// Appends one metadata_props entry.
void add_node_metadata(onnx::NodeProto* np, const std::string& key, const std::string& value);

}  // namespace tcc
