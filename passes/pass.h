// What every pass is: a free function `bool name(Graph&, PassContext&)` that
// rewrites the graph in place and returns whether it changed anything, in its
// own file under passes/, listed once in pass_registry.cc.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

// Named counters a pass bumps ("nodes_removed"); shown by --time-passes and
// the `passes` log topic.
struct PassStats {
  std::map<std::string, int64_t> counters;
  void add(const std::string& name, int64_t n = 1) { counters[name] += n; }
};

// The arithmetic a compiled model runs in (--precision), as trtexec's --fp16 /
// --bf16 and torch's allow_tf32 / autocast: fp32, exact; tf32, tensor cores for
// the f32 products of GEMMs, convolutions and attention; fp16 and bf16, products
// in that dtype accumulated in f32, by autocast's rules (passes/autocast.cc).
enum class Precision { FP32, TF32, FP16, BF16 };
inline constexpr std::array<Precision, 4> kPrecisions = {Precision::FP32, Precision::TF32, Precision::FP16,
                                                         Precision::BF16};

std::string_view precision_name(Precision p);
std::optional<Precision> parse_precision(std::string_view name);

// State shared by the passes of one pipeline run. The pass manager resets
// `stats` before each pass.
struct PassContext {
  PassStats stats;
  bool fusion = true;  // false: fuse gives every node a kernel of its own (the eager mode's baseline)
  Precision precision = Precision::FP32;
};

using PassFn = bool (*)(Graph&, PassContext&);

// Pipeline phases, in the order they run; usable as --stop-after=<phase>.
enum class Phase { Import, Optimize, Fuse, Codegen };

std::string_view phase_name(Phase p);
std::optional<Phase> parse_phase(std::string_view name);

struct PassInfo {
  std::string_view name;     // command-line name (--passes=name)
  std::string_view summary;  // one line for --list-passes
  Phase phase;
  PassFn fn;
};

// Every pass, in pipeline order (phase by phase). The one list that CLI help,
// --passes= parsing and the default pipeline are built from.
const std::vector<PassInfo>& all_passes();
// Null when no pass has this name.
const PassInfo* find_pass(std::string_view name);

// The passes, one declaration per pass file.
bool dce(Graph& g, PassContext& ctx);
bool canonicalize(Graph& g, PassContext& ctx);
bool constant_fold(Graph& g, PassContext& ctx);
bool simplify_algebra(Graph& g, PassContext& ctx);
bool cse(Graph& g, PassContext& ctx);
bool fuse_attention(Graph& g, PassContext& ctx);
bool fold_transpose_matmul(Graph& g, PassContext& ctx);
bool fold_batchnorm_conv(Graph& g, PassContext& ctx);
bool conv1x1_matmul(Graph& g, PassContext& ctx);
bool fuse_qdq(Graph& g, PassContext& ctx);
bool autocast(Graph& g, PassContext& ctx);
bool resolve_shapes(Graph& g, PassContext& ctx);
bool recompute_activations(Graph& g, PassContext& ctx);
bool decompose(Graph& g, PassContext& ctx);
bool flatten_outputs(Graph& g, PassContext& ctx);
bool fold_views(Graph& g, PassContext& ctx);
bool fuse(Graph& g, PassContext& ctx);
bool fuse_multi_tensor(Graph& g, PassContext& ctx);

}  // namespace tcc
