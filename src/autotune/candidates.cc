#include "src/autotune/candidates.h"

#include <algorithm>

#include "codegen/emit.h"
#include "codegen/gemm_template.h"
#include "codegen/template_kernel.h"

namespace tcc::autotune {

namespace {

constexpr int kGemmSplits[] = {2, 4, 8};

// Gemm and conv kernels pick among a library's algorithms (gemm also tcc's template), not launch knobs.
bool chooses_library_algorithm(const kir::Kernel& k) { return k.kind == kir::Kind::Gemm || k.kind == kir::Kind::Conv; }

// Several rows per block only pays when there are many rows: with few, it
// leaves SMs idle. Static row counts below this keep one row per block.
constexpr int64_t kManyRows = 1024;

bool many_rows(const kir::Kernel& k) {
  SymExpr rows = row_count(k);
  return !rows.is_constant() || rows.constant_value() >= kManyRows;
}

std::vector<KernelConfig> neighbours(const kir::Kernel& k, const KernelConfig& c) {
  std::vector<KernelConfig> out;
  if (chooses_library_algorithm(k)) return out;
  auto add = [&](KernelConfig n) {
    if (n != c && config_refusal(k, n).empty()) out.push_back(n);
  };
  // A cached row keeps fitting its cache at the new block size.
  for (int block : {c.block * 2, c.block / 2}) {
    KernelConfig n = c;
    n.block = block;
    if (c.row_cache > 0) n.row_cache = fitting_row_cache(k, n);
    add(n);
  }
  KernelConfig n = c;
  if (k.kind == kir::Kind::Pointwise) {
    n.vector_width = c.vector_width == 1 ? 4 : 1;
    add(n);
    n = c;
    n.tiled = !c.tiled;
    add(n);
  } else {
    n.rows_per_block = c.rows_per_block * 2;
    add(n);
    n.rows_per_block = c.rows_per_block / 2;
    add(n);
    n = c;
    n.split = c.split * 2;
    add(n);
    n.split = c.split / 2;
    add(n);
    n = c;
    n.columns = !c.columns;
    add(n);
    n = c;
    n.row_cache = c.row_cache > 0 ? 0 : fitting_row_cache(k, c);
    add(n);
  }
  return out;
}

}  // namespace

std::vector<KernelConfig> candidates(const kir::Kernel& k, const DeviceProfile& device) {
  std::vector<KernelConfig> out = {default_config(k, device)};
  auto add = [&](const KernelConfig& c) {
    if (config_refusal(k, c).empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (const TemplateKernel* t = template_kernel(k.kind)) {
    for (const KernelConfig& c : t->configs(k)) add(c);
  } else if (chooses_library_algorithm(k)) {
    for (int algo = 1; algo < kLibraryAlgos; ++algo) {
      KernelConfig c;
      c.algo = algo;
      add(c);
    }
    for (int tile = 1; tile <= static_cast<int>(kGemmTiles.size()); ++tile) {
      KernelConfig c;
      c.tile = tile;
      add(c);
    }
    // Split-K on the small two-stage tiles (64 x 64 and less), for GEMMs with few output tiles and a long K.
    for (int tile = 1; tile <= static_cast<int>(kGemmTiles.size()); ++tile) {
      const GemmTile& t = kGemmTiles[static_cast<size_t>(tile - 1)];
      if (t.stages != 2 || t.bm * t.bn > 64 * 64) continue;
      for (int split : kGemmSplits) {
        KernelConfig c;
        c.tile = tile;
        c.split = split;
        add(c);
      }
    }
  } else if (k.kind == kir::Kind::Pointwise) {
    for (bool tiled : {true, false})
      for (int vec : {4, 1})
        for (int block = 64; block <= kMaxBlock; block *= 2) {
          KernelConfig c{block, vec, 1};
          c.tiled = tiled;
          add(c);
        }
  } else {
    std::vector<int> rows = {1};
    if (many_rows(k)) rows = {1, 2, 4};
    const KernelConfig row_default = row_reduction_config(k, device);
    KernelConfig c;
    // Each with the row cache that fits it (where the body may cache one) and without.
    for (int r : rows)
      for (int block = kMinBlock; block <= kMaxBlock; block *= 2) {
        c = {block, 1, r};
        c.split = r == 1 ? row_default.split : 1;
        c.row_cache = fitting_row_cache(k, c);
        add(c);
        c.row_cache = 0;
        add(c);
      }
    // Split factors at the row heuristic's block size: every power of two up
    // to twice its choice (or 64 where it splits nothing).
    if (splits_rows(k)) {
      c = row_default;
      int most = std::min(kMaxSplit, std::max(64, 2 * c.split));
      for (c.split = 1; c.split <= most; c.split *= 2) add(c);
    }
    // Columns read side by side, each shared by 2 to 32 threads; where the
    // rows split, 256 threads' columns in 2 to 64 slices.
    if (reduces_columns(k)) {
      c = KernelConfig{};
      c.columns = true;
      for (c.block = 2 * kColumnRows; c.block <= kMaxBlock; c.block *= 2) add(c);
      c.block = 256;
      if (splits_rows(k))
        for (c.split = 2; c.split <= 64; c.split *= 2) add(c);
    }
  }
  return out;
}

std::string config_text(const kir::Kernel& k, const KernelConfig& c) {
  if (const TemplateKernel* t = template_kernel(k.kind)) return t->config_text(c);
  if (k.kind == kir::Kind::Gemm && c.tile > 0)
    return gemm_template_text(c);
  if (k.kind == kir::Kind::Gemm) return "cublaslt #" + std::to_string(c.algo);
  if (k.kind == kir::Kind::Conv) return "cudnn #" + std::to_string(c.algo);
  std::string s = "block=" + std::to_string(c.block);
  if (k.kind == kir::Kind::Reduction && c.columns)
    return s + " columns" + (c.split > 1 ? " split=" + std::to_string(c.split) : "");
  if (k.kind == kir::Kind::Reduction)
    return s + " rows=" + std::to_string(c.rows_per_block) + (c.split > 1 ? " split=" + std::to_string(c.split) : "") +
           (c.row_cache > 0 ? " cache=" + std::to_string(c.row_cache) : "");
  return s + (c.tiled ? " tiled" : " vec=" + std::to_string(c.vector_width));
}

std::optional<DescentResult> coordinate_descent(const kir::Kernel& k, const KernelConfig& start, const CostFn& cost,
                                                double threshold, int max_rounds) {
  DescentResult r;
  std::vector<std::pair<KernelConfig, std::optional<double>>>& tried = r.tried;
  auto cost_of = [&](const KernelConfig& c) {
    for (const auto& [done, t] : tried)
      if (done == c) return t;
    tried.emplace_back(c, cost(c));
    return tried.back().second;
  };
  std::optional<double> first = cost_of(start);
  if (!first) return std::nullopt;
  r.best = start;
  r.cost = *first;
  for (int round = 0; round < max_rounds; ++round) {
    bool moved = false;
    for (const KernelConfig& n : neighbours(k, r.best)) {
      std::optional<double> t = cost_of(n);
      if (t && *t < r.cost * (1 - threshold)) {
        r.best = n;
        r.cost = *t;
        moved = true;
      }
    }
    if (!moved) break;
  }
  return r;
}

}  // namespace tcc::autotune
