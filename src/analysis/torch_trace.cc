#include "src/analysis/torch_trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "src/diag/errors.h"

namespace tcc {

namespace fs = std::filesystem;

namespace {

// One record: its header's JSON and its payload lines (tabs removed).
struct Record {
  nlohmann::json meta;
  std::vector<std::string> payload;
  std::string where;  // "file:line" of the header
};

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Reads the records of one log. A header is "<L><MMDD> <time> <pid> <file>:<line>] {json}" with L one of V I W E.
std::vector<Record> read_records(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string() + ": cannot open the TORCH_TRACE log");
  std::vector<Record> records;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line[0] == '\t') {
      if (!records.empty()) records.back().payload.push_back(line.substr(1));
      continue;
    }
    size_t json_at = line.find("] {");
    if (line.empty() || std::string("VIWE").find(line[0]) == std::string::npos || json_at == std::string::npos)
      continue;
    Record r;
    r.where = path.string() + ":" + std::to_string(n);
    try {
      r.meta = nlohmann::json::parse(line.substr(json_at + 2));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(r.where + ": expected a TORCH_TRACE record's JSON object (" + e.what() + ")");
    }
    if (!r.meta.is_object()) throw InputError(r.where + ": expected a TORCH_TRACE record's JSON object");
    records.push_back(std::move(r));
  }
  return records;
}

std::string compile_id_of(const Record& r) {
  const nlohmann::json& m = r.meta;
  if (!m.contains("frame_id") || !m.contains("frame_compile_id") || !m["frame_id"].is_number_integer() ||
      !m["frame_compile_id"].is_number_integer())
    throw InputError(r.where + ": expected integer frame_id and frame_compile_id in the record");
  return std::to_string(m["frame_id"].get<int64_t>()) + "/" + std::to_string(m["frame_compile_id"].get<int64_t>());
}

template <class T>
T field(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

// explain's break kinds, from torch's title of the break.
std::string break_kind(const std::string& reason) {
  if (reason.find("Data-dependent branching") != std::string::npos) return "data_dependent_control_flow";
  if (reason.find("Dynamic shape operator") != std::string::npos ||
      reason.find("data-dependent output shape") != std::string::npos)
    return "data_dependent_shape";
  if (reason.find(".item()") != std::string::npos || reason.find(".tolist()") != std::string::npos)
    return "non_tensor_value";
  return "unsupported_op";
}

// "Graph break in user code at FILE:LINE", then "Graph Break Reason: ...", the
// break's title (on that line or the last unindented one before the
// explanation), "  Explanation: ...", "  Hint: ..." lines.
TorchGraphBreak parse_break(const Record& r) {
  TorchGraphBreak b;
  for (const std::string& line : r.payload) {
    if (line.starts_with("Graph break in user code at ")) {
      b.source = trimmed(line.substr(28));
    } else if (line.starts_with("Graph Break Reason: ")) {
      b.reason = trimmed(line.substr(20));
    } else if (line.starts_with("  Explanation: ")) {
      if (b.explanation.empty()) b.explanation = trimmed(line.substr(15));
    } else if (line.starts_with("  Hint: ")) {
      if (b.hint.empty()) b.hint = trimmed(line.substr(8));
    } else if (b.explanation.empty() && !b.reason.empty() && !line.empty() && line[0] != ' ') {
      b.reason = trimmed(line);
    }
    if (line.starts_with("User code traceback:")) break;
  }
  if (b.reason.empty()) throw InputError(r.where + ": a graph-break record without \"Graph Break Reason:\"");
  if (b.reason.back() == ':') b.reason.pop_back();
  b.kind = break_kind(b.reason);
  return b;
}

// "F/C: <guard>   # <source comment>": the guard, without the comment.
std::vector<std::string> parse_recompile_reasons(const Record& r) {
  static const std::regex kReason("^[0-9]+/[0-9]+: .*");
  std::vector<std::string> reasons;
  for (const std::string& line : r.payload) {
    if (!std::regex_match(line, kReason)) continue;
    size_t comment = line.find("  #");
    reasons.push_back(trimmed(comment == std::string::npos ? line : line.substr(0, comment)));
  }
  return reasons;
}

// The guard kinds of a guard tree ("| | +- TENSOR_MATCH: ..."): upper-case names, not the managers.
std::vector<std::string> guard_kinds(const Record& r) {
  static const std::regex kGuard(R"(^[| ]*\+- ([A-Z][A-Z_]+):)");
  std::vector<std::string> kinds;
  std::smatch m;
  for (const std::string& line : r.payload)
    if (std::regex_search(line, m, kGuard)) kinds.push_back(m[1]);
  return kinds;
}

// "skipping cudagraphs due to X. Found from : \n   File \"F\", line N, in f\n ...": the
// reason up to its stack, and the last "F:N" the stack names.
void parse_cudagraph_skip(const std::string& text, TorchCompile& c) {
  static const std::regex kFrame(R"re(File "([^"]+)", line ([0-9]+))re");
  size_t end = std::min(text.find(" Found from"), text.find('\n'));
  c.cudagraph_skip = trimmed(text.substr(0, end));
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kFrame); it != std::sregex_iterator(); ++it)
    c.cudagraph_skip_source = (*it)[1].str() + ":" + (*it)[2].str();
}

std::string seconds_text(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(s < 10 ? 3 : 1) << s << " s";
  return out.str();
}

// A reason with its numbers left out, for comparing runs.
std::string without_numbers(const std::string& s) {
  static const std::regex kNumber("[0-9]+(\\.[0-9]+)?(e[-+]?[0-9]+)?");
  return std::regex_replace(s, kNumber, "N");
}

std::string break_key(const std::string& source, const std::string& reason) { return source + " " + reason; }

// A recompile's reasons without their "F/C: " prefixes and numbers.
std::string recompile_key(const std::string& frame, const std::vector<std::string>& reasons) {
  std::string key = frame + ":";
  for (const std::string& r : reasons) {
    size_t colon = r.find(": ");
    key += " " + without_numbers(colon == std::string::npos ? r : r.substr(colon + 2));
  }
  return key;
}

}  // namespace

TorchTrace read_torch_trace(const std::string& dir) {
  TorchTrace t;
  t.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir + ": not a folder (--torch-trace takes the TORCH_TRACE folder)");
  std::vector<fs::path> logs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".log") logs.push_back(e.path());
  if (ec) throw InputError(dir + ": cannot list the folder (" + ec.message() + ")");
  if (logs.empty()) throw InputError(dir + ": no *.log file (the folder TORCH_TRACE names holds one per process)");
  std::sort(logs.begin(), logs.end());

  std::map<std::string, size_t> break_index;
  std::map<std::string, std::vector<std::string>> kinds_of;  // compile id -> guard kinds
  for (const fs::path& log : logs) {
    for (const Record& r : read_records(log)) {
      const nlohmann::json& m = r.meta;
      if (m.contains("artifact")) {
        std::string name = field<std::string>(m["artifact"], "name", "");
        if (name == "torch_version") {
          std::string text;
          for (const std::string& line : r.payload) text += line;
          nlohmann::json v = nlohmann::json::parse(text, nullptr, false);
          if (v.is_object()) t.torch_version = field<std::string>(v, "pytorch_version", "");
        } else if (name == "dynamo_graph_break_reason") {
          TorchGraphBreak b = parse_break(r);
          auto [it, fresh] = break_index.emplace(break_key(b.source, b.reason), t.breaks.size());
          if (fresh) t.breaks.push_back(b);
          ++t.breaks[it->second].times;
        } else if (name == "recompile_reasons") {
          t.recompiles.push_back({compile_id_of(r), "", parse_recompile_reasons(r)});
        }
      } else if (m.contains("dynamo_cpp_guards_str")) {
        kinds_of[compile_id_of(r)] = guard_kinds(r);
      } else if (m.contains("compilation_metrics")) {
        const nlohmann::json& c = m["compilation_metrics"];
        TorchCompile tc;
        tc.compile_id = field<std::string>(c, "compile_id", "");
        if (tc.compile_id.empty()) throw InputError(r.where + ": compilation_metrics without a compile_id");
        tc.frame = field<std::string>(c, "co_name", "");
        tc.source = field<std::string>(c, "co_filename", "") + ":" + std::to_string(field<int64_t>(c, "co_firstlineno", 0));
        tc.guards = field<int64_t>(c, "guard_count", 0);
        tc.shape_env_guards = field<int64_t>(c, "shape_env_guard_count", 0);
        tc.ops = field<int64_t>(c, "graph_op_count", 0);
        tc.seconds = field<double>(c, "entire_frame_compile_time_s", 0.0);
        std::string fail_type = field<std::string>(c, "fail_type", "");
        if (!fail_type.empty()) tc.failure = fail_type + ": " + field<std::string>(c, "fail_reason", "");
        parse_cudagraph_skip(field<std::string>(c, "cudagraph_skip_reason", ""), tc);
        if (t.torch_version.empty()) t.torch_version = field<std::string>(c, "pytorch_version", "");
        t.compiles.push_back(std::move(tc));
      }
    }
  }
  for (TorchCompile& c : t.compiles)
    if (auto it = kinds_of.find(c.compile_id); it != kinds_of.end()) c.guard_kinds = it->second;
  for (TorchRecompile& rc : t.recompiles)
    for (const TorchCompile& c : t.compiles)
      if (c.compile_id == rc.compile_id) rc.frame = c.frame;
  return t;
}

std::string torch_trace_text(const TorchTrace& t) {
  std::set<std::string> frames;
  double seconds = 0;
  for (const TorchCompile& c : t.compiles) {
    frames.insert(c.frame);
    seconds += c.seconds;
  }
  std::ostringstream out;
  out << "What torch.compile did" << (t.torch_version.empty() ? "" : " (torch " + t.torch_version + ")")
      << ", from TORCH_TRACE logs in " << t.dir << ":\n  " << t.compiles.size() << " compiles of " << frames.size()
      << " frame" << (frames.size() == 1 ? "" : "s") << ", " << t.recompiles.size() << " recompile"
      << (t.recompiles.size() == 1 ? "" : "s") << ", " << t.breaks.size() << " graph break"
      << (t.breaks.size() == 1 ? "" : "s") << ", " << seconds_text(seconds) << " compiling\n";
  if (!t.breaks.empty()) {
    out << "\nGraph breaks (each once):\n";
    for (size_t i = 0; i < t.breaks.size(); ++i) {
      const TorchGraphBreak& b = t.breaks[i];
      out << "  " << i + 1 << ". " << b.source << " [" << b.kind << "] " << b.reason;
      if (b.times > 1) out << " (logged " << b.times << " times, once per compile of its frame)";
      out << "\n";
      if (!b.explanation.empty()) out << "     " << b.explanation << "\n";
      if (!b.hint.empty()) out << "     hint: " << b.hint << "\n";
    }
  }
  if (!t.recompiles.empty()) {
    out << "\nRecompiles:\n";
    for (const TorchRecompile& r : t.recompiles) {
      out << "  [" << r.compile_id << "] " << r.frame << ":";
      for (const std::string& reason : r.reasons) out << (r.reasons.size() > 1 ? "\n      " : " ") << reason;
      out << "\n";
    }
  }
  out << "\nCompiles:\n";
  for (const TorchCompile& c : t.compiles) {
    out << "  [" << c.compile_id << "] " << c.frame << " (" << c.source << "): " << c.guards << " guards ("
        << c.shape_env_guards << " on shapes), " << c.ops << " ops, " << seconds_text(c.seconds) << "\n";
    if (!c.failure.empty()) out << "      failed: " << c.failure << "\n";
    if (!c.cudagraph_skip.empty())
      out << "      not CUDA-graphed: " << c.cudagraph_skip
          << (c.cudagraph_skip_source.empty() ? "" : " (at " + c.cudagraph_skip_source + ")") << "\n";
  }
  return out.str();
}

nlohmann::json torch_trace_json(const TorchTrace& t) {
  nlohmann::json compiles = nlohmann::json::array(), breaks = nlohmann::json::array(),
                 recompiles = nlohmann::json::array();
  double seconds = 0;
  for (const TorchCompile& c : t.compiles) {
    nlohmann::json j = {{"compile_id", c.compile_id}, {"frame", c.frame},     {"source", c.source},
                        {"guards", c.guards},         {"shape_env_guards", c.shape_env_guards},
                        {"guard_kinds", c.guard_kinds}, {"ops", c.ops},     {"seconds", c.seconds}};
    if (!c.failure.empty()) j["failure"] = c.failure;
    if (!c.cudagraph_skip.empty()) {
      j["cudagraph_skip_reason"] = c.cudagraph_skip;
      j["cudagraph_skip_source"] = c.cudagraph_skip_source;
    }
    compiles.push_back(j);
    seconds += c.seconds;
  }
  for (const TorchGraphBreak& b : t.breaks)
    breaks.push_back({{"kind", b.kind}, {"reason", b.reason}, {"explanation", b.explanation}, {"hint", b.hint},
                      {"source", b.source}, {"times", b.times}});
  for (const TorchRecompile& r : t.recompiles)
    recompiles.push_back({{"compile_id", r.compile_id}, {"frame", r.frame}, {"reasons", r.reasons}});
  return {{"dir", t.dir},
          {"torch_version", t.torch_version},
          {"compile_count", t.compiles.size()},
          {"recompile_count", t.recompiles.size()},
          {"graph_break_count", t.breaks.size()},
          {"compile_seconds", seconds},
          {"graph_breaks", breaks},
          {"recompiles", recompiles},
          {"compiles", compiles}};
}

std::vector<std::string> new_since_baseline(const TorchTrace& t, const nlohmann::json& baseline) {
  auto it = baseline.find("torch_trace");
  if (it == baseline.end() || !it->is_object())
    throw InputError("--baseline: the report has no \"torch_trace\" object (write it with tcc explain --torch-trace "
                     "--format json)");
  std::set<std::string> known;
  for (const nlohmann::json& b : field<nlohmann::json>(*it, "graph_breaks", nlohmann::json::array()))
    known.insert(break_key(field<std::string>(b, "source", ""), field<std::string>(b, "reason", "")));
  for (const nlohmann::json& r : field<nlohmann::json>(*it, "recompiles", nlohmann::json::array()))
    known.insert(recompile_key(field<std::string>(r, "frame", ""),
                               field<std::vector<std::string>>(r, "reasons", {})));
  std::vector<std::string> fresh;
  for (const TorchGraphBreak& b : t.breaks)
    if (!known.count(break_key(b.source, b.reason)))
      fresh.push_back("graph break at " + b.source + ": " + b.reason);
  for (const TorchRecompile& r : t.recompiles)
    if (!known.count(recompile_key(r.frame, r.reasons)))
      fresh.push_back("recompile [" + r.compile_id + "] of " + r.frame + ": " +
                      (r.reasons.empty() ? std::string("no reason logged") : r.reasons.front()));
  return fresh;
}

}  // namespace tcc
