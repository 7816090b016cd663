#include "frontends/onnx/node_metadata.h"

namespace tcc {

namespace {

constexpr int kNodeMetadataPropsField = 9;

}  // namespace

std::vector<std::pair<std::string, std::string>> node_metadata(const onnx::NodeProto& np) {
  std::vector<std::pair<std::string, std::string>> props;
  const auto& unknown = np.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& f = unknown.field(i);
    if (f.number() != kNodeMetadataPropsField || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited())) props.emplace_back(entry.key(), entry.value());
  }
  return props;
}

void add_node_metadata(onnx::NodeProto* np, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto entry;
  entry.set_key(key);
  entry.set_value(value);
  np->mutable_unknown_fields()->AddLengthDelimited(kNodeMetadataPropsField, entry.SerializeAsString());
}

}  // namespace tcc
