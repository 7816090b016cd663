#include "frontends/load_model.h"

#include "frontends/onnx/onnx_importer.h"
#include "frontends/pt2/pt2_importer.h"
#include "frontends/read_file.h"
#include "src/ir/text.h"
#include "src/ir/verifier.h"

namespace tcc {

namespace {
// Textual IR starts (after blank lines and comments) with the keyword "graph".
bool looks_like_text_ir(const std::string& bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    char c = bytes[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
    } else if (bytes.compare(i, 2, "//") == 0) {
      i = bytes.find('\n', i);
      if (i == std::string::npos) return false;
    } else {
      return bytes.compare(i, 5, "graph") == 0 || bytes.compare(i, 5, "model") == 0;
    }
  }
  return false;
}
}  // namespace

std::unique_ptr<Model> load_model(const std::string& path) {
  std::string bytes = read_file_bytes(path, "model file");
  if (bytes.empty()) throw InputError(path + ": model file is empty");
  std::unique_ptr<Model> m;
  if (looks_like_text_ir(bytes)) m = parse_model(bytes, path);
  else if (looks_like_zip(bytes)) m = import_pt2_bytes(std::move(bytes), path);  // torch.export.save's .pt2
  else m = import_onnx_bytes(bytes, path);
  m->path = path;
  m->graph->set_file(path);
  verify_or_throw(*m->graph);
  return m;
}

}  // namespace tcc
