// The metadata_props of nodes, value infos and graphs, which the importer and
// the exporter share: those fields (NodeProto 9, ValueInfoProto 4, GraphProto
// 16) are newer than the ONNX protobuf classes tcc links (1.12), so they are
// read from and written to the message's unknown fields.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <utility>
#include <vector>

namespace tcc {

// The key under which a training step's node keeps its part (Node::part): "backward" or "optimizer".
inline constexpr const char* kStepPartKey = "tcc.part";

// Each one's metadata_props as (key, value) pairs, in order; entries that do not parse are skipped.
std::vector<std::pair<std::string, std::string>> node_metadata(const onnx::NodeProto& np);
std::vector<std::pair<std::string, std::string>> value_info_metadata(const onnx::ValueInfoProto& vi);
std::vector<std::pair<std::string, std::string>> graph_metadata(const onnx::GraphProto& gp);
// Appends one metadata_props entry.
void add_node_metadata(onnx::NodeProto* np, const std::string& key, const std::string& value);

}  // namespace tcc
