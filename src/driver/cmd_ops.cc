// `tcc ops [--format text|json|markdown]`: every op tcc knows, with the opsets
// its definition covers, whether the reference interpreter runs it, its GPU
// path in a compiled module (gpu_path: kernel, library or host) and whether
// autodiff differentiates it (a gradient rule, or its decomposition's pieces). README's op table is this command's markdown.
#include <algorithm>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "src/driver/commands.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

struct OpsOptions {
  std::string format = "text";
  std::string output;
};

struct OpRow {
  std::string domain, name;
  int64_t first = 1, last = 1;
  bool interpreter = false, gradient = false;
  std::string gpu;
};

// Registered ops, ONNX's default domain first, then by domain and name.
std::vector<OpRow> op_rows() {
  std::vector<OpRow> rows;
  for (const OpDef* d : OpRegistry::get().all()) {
    // A default-domain definition covers every opset from its own up to the newest tcc reads.
    int64_t last = d->domain.empty() ? std::max(d->since_version, kMaxOpset) : d->since_version;
    rows.push_back({d->domain, d->op_type, d->since_version, last, static_cast<bool>(d->eval),
                    d->grad || d->grad_by_decomposition, gpu_path(*d)});
  }
  std::sort(rows.begin(), rows.end(), [](const OpRow& a, const OpRow& b) {
    return std::tie(a.domain, a.name) < std::tie(b.domain, b.name);
  });
  return rows;
}

std::string qualified(const OpRow& r) { return r.domain.empty() ? r.name : r.domain + "::" + r.name; }

std::string as_json(const std::vector<OpRow>& rows) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpRow& r : rows)
    ops.push_back({{"name", r.name},
                   {"domain", r.domain},
                   {"opsets", {r.first, r.last}},
                   {"interpreter", r.interpreter},
                   {"gpu", r.gpu},
                   {"gradient", r.gradient}});
  return nlohmann::json{{"ops", ops}}.dump(2) + "\n";
}

std::string as_markdown(const std::vector<OpRow>& rows) {
  std::ostringstream out;
  out << "| op | opsets | interpreter | GPU | gradient |\n|---|---|---|---|---|\n";
  for (const OpRow& r : rows)
    out << "| " << qualified(r) << " | " << r.first << "-" << r.last << " | " << (r.interpreter ? "yes" : "no")
        << " | " << r.gpu << " | " << (r.gradient ? "yes" : "no") << " |\n";
  return out.str();
}

// s, padded with spaces to width w.
std::string padded(std::string s, size_t w) {
  s.resize(std::max(s.size(), w), ' ');
  return s;
}

std::string as_text(const std::vector<OpRow>& rows) {
  size_t width = 2;
  for (const OpRow& r : rows) width = std::max(width, qualified(r).size());
  std::ostringstream out;
  out << padded("op", width + 2) << padded("opsets", 8) << padded("interpreter", 13) << padded("gpu", 9)
      << "gradient\n";
  std::map<std::string, size_t> by_path;
  for (const OpRow& r : rows) {
    out << padded(qualified(r), width + 2) << padded(std::to_string(r.first) + "-" + std::to_string(r.last), 8)
        << padded(r.interpreter ? "yes" : "no", 13) << padded(r.gpu, 9) << (r.gradient ? "yes" : "no") << "\n";
    ++by_path[r.gpu];
  }
  out << rows.size() << " ops: " << by_path["kernel"] << " with a generated kernel, " << by_path["library"]
      << " through a library, " << by_path["host"] << " on the host\n";
  return out.str();
}

ExitCode run_ops(const OpsOptions& o) {
  std::vector<OpRow> rows = op_rows();
  if (o.format == "json") write_output(o.output, as_json(rows));
  else if (o.format == "markdown") write_output(o.output, as_markdown(rows));
  else if (o.format == "text") write_output(o.output, as_text(rows));
  else throw InputError("tcc ops: --format must be text, json or markdown, not '" + o.format + "'");
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_ops(CLI::App& cmd) {
  auto o = std::make_shared<OpsOptions>();
  cmd.add_option("--format", o->format, "text (default), json or markdown");
  cmd.add_option("-o,--output", o->output, "Write the list here instead of stdout");
  return [o]() { return run_ops(*o); };
}

}  // namespace tcc
