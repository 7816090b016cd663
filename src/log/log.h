// Logging by topic, enabled by TCC_LOG=topic,topic (mirrors TORCH_LOGS) or "all",
// and the global verbosity. Through spdlog: the runtime and the layers it links
// never include this header.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace tcc {

enum class LogTopic { GraphBreaks, Recompiles, Guards, Passes, Codegen, PerfHints, Count };

std::string_view topic_name(LogTopic t);
// Parses a TCC_LOG value; unknown topics are an InputError naming the valid ones.
void enable_log_topics(std::string_view spec);
bool log_topic_enabled(LogTopic t);
// Sets the global verbosity: 0 warnings, 1 info (-v), 2 debug (-vv).
void set_verbosity(int level);

// Logs a message under a topic when that topic is enabled (at info level, so it
// shows without -v once the user asked for the topic).
template <typename... Args>
void log_topic(LogTopic t, fmt::format_string<Args...> f, Args&&... args) {
  if (log_topic_enabled(t))
    spdlog::info("[{}] {}", topic_name(t), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tcc
