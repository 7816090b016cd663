#include "frontends/onnx/metadata_props.h"

namespace tcc {

namespace {

constexpr int kNodeMetadataPropsField = 9;
constexpr int kValueInfoMetadataPropsField = 4;
constexpr int kGraphMetadataPropsField = 16;

std::vector<std::pair<std::string, std::string>> metadata_field(const google::protobuf::Message& m, int field) {
  std::vector<std::pair<std::string, std::string>> props;
  const auto& unknown = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& f = unknown.field(i);
    if (f.number() != field || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited())) props.emplace_back(entry.key(), entry.value());
  }
  return props;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> node_metadata(const onnx::NodeProto& np) {
  return metadata_field(np, kNodeMetadataPropsField);
}

std::vector<std::pair<std::string, std::string>> value_info_metadata(const onnx::ValueInfoProto& vi) {
  return metadata_field(vi, kValueInfoMetadataPropsField);
}

std::vector<std::pair<std::string, std::string>> graph_metadata(const onnx::GraphProto& gp) {
  return metadata_field(gp, kGraphMetadataPropsField);
}

void add_node_metadata(onnx::NodeProto* np, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto entry;
  entry.set_key(key);
  entry.set_value(value);
  np->mutable_unknown_fields()->AddLengthDelimited(kNodeMetadataPropsField, entry.SerializeAsString());
}

}  // namespace tcc
