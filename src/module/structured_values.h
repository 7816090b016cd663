// A model's sequence and optional values against a module's tensors, through
// the structure manifest.json records (StructuredValue, manifest_records.h):
// what `tcc run` and the conformance runner feed a module and read back.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "src/ir/tensor.h"
#include "src/module/manifest_records.h"

namespace tcc {

// The tensors value t flattens into under structure s, added to `out` by the
// module's names. A value of another structure (kind, length, presence) is an
// InputError saying what the module was compiled for.
void flatten_structured(const StructuredValue& s, const Tensor& t, std::map<std::string, Tensor>& out);

// The value structure s assembles from the module's tensors, by name.
Tensor assemble_structured(const StructuredValue& s, const std::map<std::string, Tensor>& tensors);

// The --shape-hint entries that compile the sequence and optional values of
// `values` for their structure (xs=seq(2),xs.0=[3],xs.1=[3], opt=absent,
// ...: src/compiler/structured_io.h), joined by commas; empty when all are tensors.
std::string structure_hints(const std::map<std::string, Tensor>& values);

// The module's structured inputs or outputs in `manifest` (a parsed
// manifest.json) under `key`: structured_inputs or structured_outputs.
std::vector<StructuredValue> read_structured_list(const nlohmann::json& manifest, const char* key);

}  // namespace tcc
