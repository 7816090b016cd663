#include "src/log/log.h"

#include <algorithm>
#include <array>

#include "src/diag/errors.h"

namespace tcc {

namespace {
constexpr std::array<std::string_view, static_cast<size_t>(LogTopic::Count)> kTopicNames = {
    "graph_breaks", "recompiles", "guards", "passes", "codegen", "perf_hints"};
std::array<bool, static_cast<size_t>(LogTopic::Count)> g_topics{};
int g_verbosity = 0;

void apply_level() {
  bool any_topic = false;
  for (bool b : g_topics) any_topic |= b;
  int level = std::max(g_verbosity, any_topic ? 1 : 0);
  spdlog::set_level(level >= 2 ? spdlog::level::debug
                    : level == 1 ? spdlog::level::info
                                 : spdlog::level::warn);
}
}  // namespace

std::string_view topic_name(LogTopic t) { return kTopicNames[static_cast<size_t>(t)]; }

void enable_log_topics(std::string_view spec) {
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    if (item.front() == '+') item.remove_prefix(1);
    if (item == "all") {
      g_topics.fill(true);
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < kTopicNames.size(); ++i)
      if (kTopicNames[i] == item) g_topics[i] = found = true;
    if (!found) {
      std::string valid;
      for (auto n : kTopicNames) valid += std::string(valid.empty() ? "" : ", ") + std::string(n);
      throw InputError("TCC_LOG: unknown topic '" + std::string(item) + "'; expected one of: " +
                       valid + ", all");
    }
  }
  apply_level();
}

bool log_topic_enabled(LogTopic t) { return g_topics[static_cast<size_t>(t)]; }

void set_verbosity(int level) {
  g_verbosity = level;
  apply_level();
}

}  // namespace tcc
