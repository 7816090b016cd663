// CUDA C++ for NVRTC. Pointwise kernels are grid-stride loops over the domain
// (four f32 elements per thread, as float4, when every access is contiguous
// along a static last axis divisible by four), or over 32 x 32 tiles turned
// round in shared memory when a load reads across the axis the kernel writes
// along (tiled transposes, below); reduction kernels give each row
// one block, whose threads accumulate strided parts of the row and combine them
// with warp shuffles and shared memory, keeping what later passes read in
// registers (row caches, below), or, when rows are few and long, several
// blocks per row (split reductions, below); where rows lie side by side in
// memory, a config may give a block 32 neighbouring rows instead (column
// reductions, KernelConfig::columns); a scan (CumSum) takes its row in tiles
// of the block's threads, each tile's running sums a block scan carried on to
// the next (CudaKernel::scanned). Gemm kernels run through cuBLASLt,
// unless their config picks tcc's own template (codegen/gemm_template.h), and
// conv kernels through cuDNN: library calls emit nothing here. The template
// kinds' kernels (attention, TopK, ...) come whole from their template files
// (codegen/template_kernel.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string_view>

#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/emit_cuda_helpers.h"
#include "codegen/attention_template.h"
#include "codegen/gemm_template.h"
#include "codegen/template_kernel.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

using emitc::define;
using emitc::size_expr;
using kir::Op;

// Tiled pointwise kernels (KernelConfig::tiled) turn kTile x kTile tiles
// round in shared memory; a static extent below kMinTiledExtent along either
// tile axis would leave most of each tile empty.
constexpr int kTile = 32;
constexpr int64_t kMinTiledExtent = 8;
constexpr int64_t kInt32Limit = int64_t{1} << 31;

// Split reductions. One block per row leaves most of the GPU idle when rows are
// few (a global sum is one row), so the rows of such kernels are cut into
// slices of one block each: a block writes its slice's partial to the kernel's
// workspace, and the last block of the row to arrive (an atomic counter per
// row) combines the partials in slice order, so the result does not depend on
// which block arrives last, runs the row's epilogue and resets the counter for
// the next launch. Only single-pass bodies split: one reduction whose result is
// a row value, row values and row stores after it. Bodies with a later pass
// over the row's elements (softmax, layer norm: the pass reads the reduction's
// row value) keep one block per row, since every slice would need the whole
// row's result before its next pass. Column reductions (reduces_columns) split
// the same way, a block taking a slice of 32 neighbouring rows, and each of
// its threads along x arrives for its own row. The host target has no split: it runs a
// row in one loop. Which kernels split, and how many ways, is kernel_schedule.cc's
// choice (reduction_split, column_split).

// Row caches (KernelConfig::row_cache). A body with passes after the first
// (softmax: max, sum, store; layer norm: mean, variance, store) reads its row
// once per pass. With a cache of R, the thread holding elements
// j = threadIdx.x + u * blockDim.x (u < R) keeps in registers each value a
// later pass reads, so every element is loaded and computed once, as Inductor's
// persistent reductions do. The passes unroll over u and accumulate in the
// looped path's order, so both paths give the same bits.
// kRowCacheRegisters: the 32-bit registers one thread's cached values may
// take (an 8-byte value takes two); larger caches would spill.
constexpr int kRowCacheRegisters = 64;
// The looped path's elements per unrolled iteration (CudaKernel::looped).
constexpr int kLoopUnroll = 4;
// The workspace: rows x split partials of 8 bytes (every accumulator type
// fits), then one uint32 arrival counter per row.
constexpr int64_t kPartialBytes = 8;
constexpr int64_t kCounterBytes = 4;

bool fits_int32(const SymExpr& e) { return e.is_constant() && e.constant_value() < kInt32Limit; }

// A load that steps by more than one element along the last axis and by one
// along `axis`: what a tile reads along `axis`.
bool transposed_load(const kir::Instr& in, size_t axis) {
  const std::vector<SymExpr>& s = in.index.strides;
  return in.op == Op::Load && s.back() != SymExpr() && s.back() != SymExpr::constant(1) &&
         s[axis] == SymExpr::constant(1);
}

}  // namespace

int transpose_axis(const kir::Kernel& k) {
  if (k.kind != kir::Kind::Pointwise || k.domain.size() < 2) return -1;
  const size_t last = k.domain.size() - 1;
  int axis = -1;
  for (const kir::Instr& in : k.body) {
    if (in.op == Op::Coord || (in.op == Op::Load && !in.args.empty()) || in.dynamic >= 0 ||
        in.accumulate != kir::Accumulate::None)
      return -1;
    if (in.op == Op::Store && in.index.strides.back() != SymExpr::constant(1)) return -1;
    for (size_t d = 0; d < last; ++d) {
      if (!transposed_load(in, d)) continue;
      if (axis >= 0 && axis != static_cast<int>(d)) return -1;
      axis = static_cast<int>(d);
    }
  }
  if (axis < 0) return -1;
  for (size_t d : {static_cast<size_t>(axis), last})
    if (k.domain[d].is_constant() && k.domain[d].constant_value() < kMinTiledExtent) return -1;
  return axis;
}

namespace {

// Which instructions have one value for all four elements of a float4 along
// the last axis (std::nullopt where the last axis's coordinate is used any
// other way than below): everything not computed from a load or from that
// coordinate, and that coordinate's comparisons with a bound that is a
// multiple of four (Concat's guards, `c >= start` and `c < start + size`),
// which no aligned group of four straddles.
std::optional<std::vector<bool>> lane_uniform(const kir::Kernel& k) {
  const size_t last = k.domain.size() - 1;
  auto quad_bound = [&](const kir::Instr& b) {
    if (b.op == Op::Const) return std::fmod(b.value, kVectorWidth) == 0;
    return b.op == Op::SizeValue && emitc::divisible_by(b.size, kVectorWidth);
  };
  std::vector<bool> uniform(k.body.size(), false);
  for (size_t i = 0; i < k.body.size(); ++i) {
    const kir::Instr& in = k.body[i];
    bool lane_coord_read = false, all_uniform = true;
    for (int a : in.args) {
      const kir::Instr& arg = k.body[static_cast<size_t>(a)];
      lane_coord_read |= arg.op == Op::Coord && arg.axis == static_cast<int>(last);
      all_uniform = all_uniform && uniform[static_cast<size_t>(a)];
    }
    if (in.op == Op::Coord) {
      uniform[i] = in.axis != static_cast<int>(last);
    } else if (lane_coord_read) {
      bool compares = (in.op == Op::GreaterOrEqual || in.op == Op::Less) && in.args.size() == 2 &&
                      k.body[static_cast<size_t>(in.args[0])].op == Op::Coord &&
                      quad_bound(k.body[static_cast<size_t>(in.args[1])]);
      if (!compares) return std::nullopt;
      uniform[i] = true;
    } else {
      uniform[i] = in.op != Op::Load && in.op != Op::Store && all_uniform;
    }
  }
  return uniform;
}

}  // namespace

// Every buffer is f32, every access steps by 1 (stores) or 0 or 1 (loads)
// along a last axis whose extent is a nonzero multiple of four (a symbolic one,
// such as collapse_axes makes of [s, 768], for every value), every other stride and offset
// keeps the 16-byte alignment of a float4, and what a load's or store's guard
// reads is the same for the four elements (lane_uniform: a Concat along the
// last axis at multiples of four).
bool vectorizes(const kir::Kernel& k) {
  if (k.kind != kir::Kind::Pointwise || k.domain.empty()) return false;
  const SymExpr& last = k.domain.back();
  if (last == SymExpr() || !emitc::divisible_by(last, kVectorWidth)) return false;
  for (const kir::Buffer& b : k.buffers)
    if (b.dtype != DType::F32) return false;
  std::optional<std::vector<bool>> uniform = lane_uniform(k);
  if (!uniform) return false;
  bool any_contiguous = false;
  for (const kir::Instr& in : k.body) {
    if (in.dynamic >= 0 || in.accumulate != kir::Accumulate::None) return false;  // per-element, not per float4
    if (in.op != Op::Load && in.op != Op::Store) continue;
    size_t guard = in.op == Op::Load ? 0 : 1;
    if (in.args.size() > guard && !(*uniform)[static_cast<size_t>(in.args[guard])]) return false;
    const SymExpr& s = in.index.strides.back();
    bool contiguous = s == SymExpr::constant(1);
    if (!contiguous && (in.op == Op::Store || s != SymExpr())) return false;
    any_contiguous |= contiguous;
    if (!emitc::divisible_by(in.index.offset, kVectorWidth)) return false;
    for (size_t d = 0; d + 1 < in.index.strides.size(); ++d)
      if (!emitc::divisible_by(in.index.strides[d], kVectorWidth)) return false;
  }
  return any_contiguous;
}

namespace {

// Which values a row cache keeps: each pass computes only the element values
// no earlier pass computed (`fresh`), reading the ones an earlier pass did
// (`reused`) from the cache; `kept` marks every value some later pass reuses.
struct RowCachePlan {
  std::vector<std::vector<int>> fresh, reused;
  std::vector<bool> kept;
  int registers = 0;  // per cached element
};

RowCachePlan plan_row_cache(const kir::Kernel& k, const emitc::ReductionPlan& p) {
  RowCachePlan c;
  std::vector<bool> done(k.body.size(), false);
  c.kept.assign(k.body.size(), false);
  for (size_t pass = 0; pass < p.passes.size(); ++pass) {
    std::vector<int> fresh, reused;
    for (int i : p.passes[pass])
      if (!done[static_cast<size_t>(i)]) fresh.push_back(i);
    auto reuse = [&](int a) {
      if (!done[static_cast<size_t>(a)] || std::find(reused.begin(), reused.end(), a) != reused.end()) return;
      reused.push_back(a);
      c.kept[static_cast<size_t>(a)] = true;
    };
    for (int i : fresh)
      for (int a : k.body[static_cast<size_t>(i)].args) reuse(a);
    if (pass < p.reductions.size()) reuse(k.body[static_cast<size_t>(p.reductions[pass])].args[0]);
    for (int i : fresh) done[static_cast<size_t>(i)] = true;
    std::sort(reused.begin(), reused.end());
    c.fresh.push_back(std::move(fresh));
    c.reused.push_back(std::move(reused));
  }
  for (size_t i = 0; i < k.body.size(); ++i)
    if (c.kept[i]) c.registers += dtype_size(k.body[i].dtype) == 8 ? 2 : 1;
  return c;
}

class CudaKernel : emitc::CodeWriter {
 public:
  CudaKernel(const kir::Kernel& k, const KernelConfig& c)
      : k_(k), c_(c), split_(c.split > 1), columns_(k.kind == kir::Kind::Reduction && c.columns), scan_(emitc::scans(k)) {
    TCC_CHECK(c.vector_width == 1 || (c.vector_width == kVectorWidth && vectorizes(k)))
        << "kernel " << k.name << ": vector width " << c.vector_width << " is not valid for it";
    TCC_CHECK(!split_ || (c.rows_per_block == 1 && splits_rows(k)))
        << "kernel " << k.name << ": split " << c.split << " is not valid for it";
    TCC_CHECK(!columns_ || (c.rows_per_block == 1 && c.block % kColumnRows == 0 && reduces_columns(k)))
        << "kernel " << k.name << ": the column schedule is not valid for it";
    std::string refusal = row_cache_refusal(k, c);
    TCC_CHECK(refusal.empty()) << "kernel " << k.name << ": " << refusal;
    TCC_CHECK(!c.tiled || (c.vector_width == 1 && transpose_axis(k) >= 0))
        << "kernel " << k.name << ": tiles are not valid for it";
  }

  // A cached kernel's launch bound keeps its registers within what its block
  // may have: the compiler spills rather than leave the launch to fail.
  std::string print() {
    out_ += emitc::cuda_signature(k_, split_, c_.row_cache > 0 ? c_.block : 0);
    if (k_.kind == kir::Kind::Reduction) reduction();
    else if (c_.tiled) tiled_pointwise();
    else if (c_.vector_width == kVectorWidth) vector_pointwise();
    else pointwise();
    out_ += "}\n";
    return out_;
  }

 private:
  void emit(int i) {
    const kir::Instr& in = k_.body[i];
    TCC_CHECK(in.op != Op::MatMulAcc && in.op != Op::ConvAcc)
        << "kernel " << k_.name << ": " << op_name(in.op) << " outside a library kernel";
    if (in.op == Op::ScanSum) return scan(i);
    std::string live = scan_ && in.op == Op::Store ? "if (live) " : "";
    out_ += indent() + (in.op == Op::Store ? live + emitc::store(k_, i, emitc::Target::Cuda) : define(k_, i));
  }

  // The tile's scan of the element values (dead threads' zeros), after the
  // carry of the row's tiles before (scanned).
  void scan(int i) {
    const kir::Instr& in = k_.body[i];
    std::string A = emitc::accumulator_type(in.dtype), s = std::to_string(i), T = emitc::compute_type(in.dtype);
    line(A + " total" + s + ";");
    line("const " + T + " v" + s + " = (" + T + ")(carry" + s + " + tcc_block_scan<" + A + ">(live ? (" + A + ")v" +
         std::to_string(in.args.at(0)) + " : (" + A + ")0, &total" + s + "));");
    kir::Instr sum = in;
    sum.op = Op::ReduceSum;
    line(emitc::reduce_step(sum, "carry" + s, "total" + s));
  }

  // A scan's row in tiles of blockDim.x consecutive elements, thread t taking
  // element base + t of each (in the last tile, threads past the row take its
  // last element and join the block's scan, storing nothing: `live`); each
  // scan carries the sum of the tiles before.
  void scanned(const std::function<void()>& element) {
    for (size_t i = 0; i < k_.body.size(); ++i)
      if (k_.body[i].op == Op::ScanSum)
        line(std::string(emitc::accumulator_type(k_.body[i].dtype)) + " carry" + std::to_string(i) + " = 0;");
    open("for (int64_t base = 0; base < len; base += blockDim.x)");
    line("const bool live = base + threadIdx.x < len;");
    line("const int64_t j = live ? base + threadIdx.x : len - 1;");
    element();
    close();
  }

  // Coordinates c<begin>..c<end-1> of the flat position `flat` (an int64
  // expression) within those axes, in 32-bit arithmetic when the axes are
  // static and their product is small: 64-bit division is slow on the GPU.
  void coordinates(const std::string& flat, size_t begin, size_t end) {
    if (begin == end) return;
    bool narrow = true;
    int64_t extent = 1;
    for (size_t d = begin; d < end && narrow; ++d) {
      narrow = k_.domain[d].is_constant() && k_.domain[d].constant_value() < kInt32Limit;
      if (narrow) extent *= k_.domain[d].constant_value();
      narrow = narrow && extent < kInt32Limit;
    }
    std::string t = "t" + std::to_string(begin);
    line(narrow ? "uint32_t " + t + " = (uint32_t)(" + flat + ");" : "int64_t " + t + " = " + flat + ";");
    for (size_t d = end; d-- > begin;) {
      std::string c = "c" + std::to_string(d);
      if (d == begin) {
        line("const int64_t " + c + " = " + t + ";");
        break;
      }
      if (k_.domain[d] == SymExpr::constant(1)) {
        line("const int64_t " + c + " = 0;");
        continue;
      }
      std::string e = narrow ? std::to_string(k_.domain[d].constant_value()) + "u" : size_expr(k_.domain[d]);
      if (!k_.domain[d].is_constant() && !k_.domain[d].is_symbol()) e = "(" + e + ")";
      line("const int64_t " + c + " = " + t + " % " + e + ";");
      line(t + " /= " + e + ";");
    }
  }

  void pointwise() {
    line("const int64_t n = " + size_expr(domain_size(k_)) + ";");
    open("for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)");
    coordinates("i", 0, k_.domain.size());
    for (size_t i = 0; i < k_.body.size(); ++i) emit(static_cast<int>(i));
    close();
  }

  // Four elements per thread along the last axis: what is the same for the
  // four (lane_uniform: guards, broadcast loads) is computed once, contiguous
  // loads are float4s (a guarded one reads nothing where its guard is false),
  // the rest runs per element, and stores are float4s.
  void vector_pointwise() {
    // Computed once for the four: what lane_uniform says is the same for them,
    // and the coordinates (the last axis's, which only guards read, the first of the four's).
    std::vector<bool> once = *lane_uniform(k_);
    for (size_t i = 0; i < k_.body.size(); ++i) once[i] = once[i] || k_.body[i].op == Op::Coord;
    line("const int64_t n = " + size_expr(domain_size(k_).floordiv(SymExpr::constant(kVectorWidth))) + ";");
    open("for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)");
    coordinates("i * 4", 0, k_.domain.size());
    auto quad = [](const kir::Instr& in) {
      return (in.op == Op::Load || in.op == Op::Store) && in.index.strides.back() == SymExpr::constant(1);
    };
    std::vector<int> stores;
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const kir::Instr& in = k_.body[i];
      std::string id = std::to_string(i);
      if (in.op == Op::Load && quad(in)) {
        std::string load = "*(const float4*)(p" + std::to_string(in.buffer) + " + " + emitc::index_expr(in.index) + ")";
        if (!in.args.empty()) load = "v" + std::to_string(in.args[0]) + " ? " + load + " : make_float4(0.f, 0.f, 0.f, 0.f)";
        line("const float4 q" + id + " = " + load + ";");
      } else if (in.op == Op::Store) {
        line("float4 q" + id + ";");
        stores.push_back(static_cast<int>(i));
      } else if (in.op == Op::Load || once[i]) {
        emit(static_cast<int>(i));
      }
    }
    line("#pragma unroll");
    open("for (int l = 0; l < 4; ++l)");
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const kir::Instr& in = k_.body[i];
      std::string id = std::to_string(i);
      if (in.op == Op::Load && quad(in)) line("const float v" + id + " = (&q" + id + ".x)[l];");
      else if (in.op == Op::Store) line("(&q" + id + ".x)[l] = v" + std::to_string(in.args.at(0)) + ";");
      else if (in.op != Op::Load && !once[i]) emit(static_cast<int>(i));
    }
    close();
    for (int s : stores) {
      const kir::Instr& in = k_.body[static_cast<size_t>(s)];
      std::string store = "*(float4*)(p" + std::to_string(in.buffer) + " + " + emitc::index_expr(in.index) + ") = q" +
                          std::to_string(s) + ";";
      line(in.args.size() > 1 ? "if (v" + std::to_string(in.args[1]) + ") " + store : store);
    }
    close();
  }

  // kTile x kTile tiles over (transpose_axis, the last axis), a block's
  // tiles in a grid-stride loop; the other axes' coordinates come from the
  // tile's index. The block's threads first read each transposed load with
  // threadIdx.x along the transpose axis, where it is contiguous, into a
  // shared tile, then run the body with threadIdx.x along the last axis,
  // taking those loads from the tile turned round. A tile row's one element of
  // padding keeps both phases' warps off a shared memory bank twice.
  void tiled_pointwise() {
    const size_t a = static_cast<size_t>(transpose_axis(k_)), last = k_.domain.size() - 1;
    const std::string T = std::to_string(kTile), ca = "c" + std::to_string(a), cl = "c" + std::to_string(last);
    std::vector<int> tiled;
    for (size_t i = 0; i < k_.body.size(); ++i)
      if (transposed_load(k_.body[i], a)) {
        tiled.push_back(static_cast<int>(i));
        line("__shared__ " + std::string(emitc::compute_type(k_.body[i].dtype)) + " tile" + std::to_string(i) + "[" +
             T + "][" + std::to_string(kTile + 1) + "];");
      }
    auto extent = [&](size_t d) { return "(" + size_expr(k_.domain[d]) + ")"; };
    line("const int64_t tiles_a = (" + extent(a) + " + " + std::to_string(kTile - 1) + ") / " + T + ", tiles_l = (" +
         extent(last) + " + " + std::to_string(kTile - 1) + ") / " + T + ";");
    std::string tiles = "tiles_a * tiles_l";
    for (size_t d = 0; d < last; ++d)
      if (d != a) tiles += " * " + extent(d);
    line("const int64_t tiles = " + tiles + ";");
    open("for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x)");
    line("int64_t t = tile;");
    line("const int64_t l0 = t % tiles_l * " + T + ";");
    line("t /= tiles_l;");
    line("const int64_t a0 = t % tiles_a * " + T + ";");
    line("t /= tiles_a;");
    for (size_t d = last; d-- > 0;) {
      if (d == a) continue;
      line("const int64_t c" + std::to_string(d) + " = t % " + extent(d) + ";");
      line("t /= " + extent(d) + ";");
    }
    const std::string inside = "if (" + ca + " < " + extent(a) + " && " + cl + " < " + extent(last) + ")";
    open("for (int y = threadIdx.y; y < " + T + "; y += blockDim.y)");
    line("const int64_t " + ca + " = a0 + threadIdx.x, " + cl + " = l0 + y;");
    open(inside);
    for (int i : tiled) {
      emit(i);
      line("tile" + std::to_string(i) + "[y][threadIdx.x] = v" + std::to_string(i) + ";");
    }
    close();
    close();
    line("__syncthreads();");
    open("for (int y = threadIdx.y; y < " + T + "; y += blockDim.y)");
    line("const int64_t " + ca + " = a0 + y, " + cl + " = l0 + threadIdx.x;");
    open(inside);
    for (size_t i = 0; i < k_.body.size(); ++i) {
      if (std::find(tiled.begin(), tiled.end(), static_cast<int>(i)) == tiled.end()) {
        emit(static_cast<int>(i));
        continue;
      }
      line("const " + std::string(emitc::compute_type(k_.body[i].dtype)) + " v" + std::to_string(i) + " = tile" +
           std::to_string(i) + "[threadIdx.x][y];");
    }
    close();
    close();
    line("__syncthreads();");
    close();
  }

  void reduction() {
    emitc::ReductionPlan p = emitc::plan_reduction(k_);
    size_t outer = k_.domain.size() - static_cast<size_t>(k_.reduce_axes);
    SymExpr rows = row_count(k_), len = row_length(k_);
    line("const int64_t rows = " + size_expr(rows) + ", len = " + size_expr(len) + ";");
    if (split_) split_count();
    if (columns_) column_row();
    else if (split_) line("const int64_t r = blockIdx.x;");
    else open("for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)");
    coordinates("r", 0, outer);
    if (c_.row_cache == 0) {
      passes(p, outer, nullptr);
    } else {
      RowCachePlan cache = plan_row_cache(k_, p);
      // A static row fits the cache (row_cache_refusal); a symbolic one is
      // checked at each launch.
      if (!len.is_constant()) open("if (len <= " + std::to_string(c_.row_cache) + " * (int64_t)blockDim.x)");
      passes(p, outer, &cache);
      if (!len.is_constant()) {
        close();
        open("else");
        passes(p, outer, nullptr);
        close();
      }
    }
    if (!split_ && !columns_) close();
  }

  // A row's passes, then its row stores: each pass over the row's elements in
  // a loop (the looped path), or, with `cache`, unrolled over the thread's
  // row_cache elements, which later passes read from registers (m<i>).
  void passes(const emitc::ReductionPlan& p, size_t outer, const RowCachePlan* cache) {
    const std::string R = std::to_string(c_.row_cache);
    if (cache)
      for (size_t i = 0; i < k_.body.size(); ++i)
        if (cache->kept[i]) line(std::string(emitc::compute_type(k_.body[i].dtype)) + " m" + std::to_string(i) + "[" + R + "];");
    bool narrow_len = fits_int32(row_length(k_));
    for (size_t pass = 0; pass < p.passes.size(); ++pass) {
      for (int i : p.row_values[pass]) emit(i);
      bool final = pass == p.reductions.size();
      if (final && p.passes[pass].empty()) break;  // only row values are stored
      std::string acc = "acc" + std::to_string(pass);
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        line(std::string(emitc::accumulator_type(r.dtype)) + " " + acc + " = " + emitc::reduce_identity(r) + ";");
      }
      // One element of the pass at coordinate j of the row.
      auto element = [&] {
        coordinates("j", outer, k_.domain.size());
        if (cache) {
          for (int a : cache->reused[pass])
            line("const " + std::string(emitc::compute_type(k_.body[a].dtype)) + " v" + std::to_string(a) + " = m" +
                 std::to_string(a) + "[u];");
          for (int i : cache->fresh[pass]) {
            emit(i);
            if (cache->kept[i]) line("m" + std::to_string(i) + "[u] = v" + std::to_string(i) + ";");
          }
        } else {
          for (int i : p.passes[pass]) emit(i);
        }
        if (!final) {
          const kir::Instr& r = k_.body[p.reductions[pass]];
          line(emitc::reduce_step(r, acc, "v" + std::to_string(r.args[0])));
        }
      };
      if (cache) {
        line("#pragma unroll");
        open("for (int u = 0; u < " + R + "; ++u)");
        line("const int j = threadIdx.x + u * blockDim.x;");
        open("if (j < len)");
        element();
        close();
        close();
      } else {
        if (scan_) scanned(element);
        else looped(element, narrow_len ? "int" : "int64_t");
      }
      if (!final) {
        const kir::Instr& r = k_.body[p.reductions[pass]];
        std::string A = emitc::accumulator_type(r.dtype);
        std::string reduced = columns_ ? "tcc_column_reduce<" + A + ">(" + acc + ", " + combiner(r.op) + "())"
                                       : "tcc_block_reduce<" + A + ">(" + acc + ", " + combiner(r.op) + "(), " +
                                             emitc::reduce_identity(r) + ")";
        if (split_) reduced = combine_slices(r, acc, reduced);
        line("const " + std::string(emitc::compute_type(r.dtype)) + " v" + std::to_string(p.reductions[pass]) + " = (" +
             emitc::compute_type(r.dtype) + ")" + reduced + ";");
      }
    }
    if (!p.row_stores.empty()) {
      open(columns_ ? "if (threadIdx.y == 0 && live)" : "if (threadIdx.x == 0)");
      for (int i : p.row_stores) emit(i);
      close();
    }
  }

  // The thread's elements j of a row (of its slice's, split; of its column's,
  // in columns), kLoopUnroll at a time while that many remain, then one at a
  // time. The unrolled elements have no branch between them, so their loads
  // are in flight together; a loop that tests j before every element keeps one
  // load outstanding per thread, and waits out each load's latency (the
  // 2026-11-25 tables' column reductions moved 0.8 TB/s). Elements are
  // accumulated in j order either way, so the bits do not change.
  void looped(const std::function<void()>& element, const std::string& J) {
    const std::string start = columns_ && split_ ? "blockIdx.y * blockDim.y + threadIdx.y"
                              : columns_         ? "threadIdx.y"
                              : split_           ? "blockIdx.y * blockDim.x + threadIdx.x"
                                                 : "threadIdx.x";
    const std::string stride = columns_ && split_ ? "split * blockDim.y"
                               : columns_         ? "blockDim.y"
                               : split_           ? "split * blockDim.x"
                                                  : "blockDim.x";
    const std::string live = columns_ ? "live && " : "";
    const std::string unroll = std::to_string(kLoopUnroll);
    open("");
    line(J + " ju = " + start + ";");
    open("for (; " + live + "ju + " + std::to_string(kLoopUnroll - 1) + " * (int64_t)(" + stride + ") < len; ju += " +
         unroll + " * " + stride + ")");
    for (int k = 0; k < kLoopUnroll; ++k) {
      open("");
      line("const " + J + " j = ju" + (k == 0 ? "" : " + " + std::to_string(k) + " * " + stride) + ";");
      element();
      close();
    }
    close();
    open("for (" + J + " j = ju; " + live + "j < len; j += " + stride + ")");
    element();
    close();
    close();
  }

  // A column block's thread works on row blockIdx.x * 32 + threadIdx.x. Past
  // the last row a thread takes the last row's place, so that its loads stay
  // in bounds and it joins every barrier, but it reads no element and stores
  // nothing (`live`). Without rows the grid's one block returns at once.
  void column_row() {
    line("if (rows == 0) return;");
    line("const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;");
    line("const bool live = first < rows;");
    line("const int64_t r = live ? first : rows - 1;");
  }

  // A split kernel's block works on slice blockIdx.y of row blockIdx.x (of
  // its column of rows). A row of symbolic length uses only the slices of
  // kSplitMinSlice elements (kColumnMinSlice in columns) it fills; the blocks
  // past them return at once.
  void split_count() {
    if (row_length(k_).is_constant()) {
      line("const int64_t split = gridDim.y;");
    } else {
      int64_t slice = columns_ ? kColumnMinSlice : kSplitMinSlice;
      line("const int64_t slices = (len + " + std::to_string(slice - 1) + ") / " + std::to_string(slice) + ";");
      line("const int64_t split = slices < 1 ? 1 : slices < (int64_t)gridDim.y ? slices : (int64_t)gridDim.y;");
      line("if (blockIdx.y >= split) return;");
    }
  }

  // The block's partial `reduced` (an expression) goes to the workspace; the
  // last block of the row combines all partials and goes on, the others return.
  // Returns the variable that holds the row's result.
  // In a column block, each thread along x finishes its own row: the threads
  // off y = 0 or past the last row return (no barrier follows in a single-pass
  // body) and the others arrive one by one.
  std::string combine_slices(const kir::Instr& r, const std::string& acc, const std::string& reduced) {
    std::string A = emitc::accumulator_type(r.dtype);
    std::string form = columns_ ? "_row<" : "<";
    line(acc + " = " + reduced + ";");
    if (columns_) line("if (threadIdx.y != 0 || !live) return;");
    open("if (split > 1)");
    line("if (!tcc_split_arrive" + form + A + ">(ws, rows, r, split, " + acc + ")) return;");
    line(acc + " = tcc_split_combine" + form + A + ">(ws, r, split, " + combiner(r.op) + "(), " +
         emitc::reduce_identity(r) + ");");
    close();
    return acc;
  }

  static const char* combiner(Op op) {
    switch (op) {
      case Op::ReduceSum: return "tcc_sum";
      case Op::ReduceProd: return "tcc_prod";
      case Op::ReduceMax: return "tcc_maxop";
      case Op::ReduceMin: return "tcc_minop";
      default: TCC_CHECK(false) << op_name(op) << " is not a reduction"; return "";
    }
  }

  const kir::Kernel& k_;
  const KernelConfig& c_;
  const bool split_;
  const bool columns_;
  const bool scan_;  // a ScanSum runs along the rows (scanned)
};

// A pointwise kernel's grid: blocks over the domain, or over its 32 x 32 tiles.
KernelLaunch pointwise_launch(const kir::Kernel& k, const KernelConfig& config) {
  KernelLaunch c;
  if (config.tiled) {
    const size_t a = static_cast<size_t>(transpose_axis(k)), last = k.domain.size() - 1;
    const SymExpr tile = SymExpr::constant(kTile), round = SymExpr::constant(kTile - 1);
    SymExpr tiles = (k.domain[a] + round).floordiv(tile) * (k.domain[last] + round).floordiv(tile);
    for (size_t d = 0; d < last; ++d)
      if (d != a) tiles = tiles * k.domain[d];
    c.grid[0] = tiles;
    c.block = {kTile, config.block / kTile, 1};
    return c;
  }
  int per_block = config.block * config.vector_width;
  c.grid[0] = (domain_size(k) + SymExpr::constant(per_block - 1)).floordiv(SymExpr::constant(per_block));
  c.block[0] = config.block;
  return c;
}

// A reduction's grid: its rows (in columns, or several to a block), times its split, and the split's workspace.
KernelLaunch reduction_launch(const kir::Kernel& k, const KernelConfig& config) {
  KernelLaunch c;
  c.block[0] = config.block;
  int split = config.split;
  if (split > 1) {
    c.grid[1] = SymExpr::constant(split);
    c.workspace_bytes = row_count(k) * SymExpr::constant(split * kPartialBytes + kCounterBytes);
  }
  if (config.columns) {
    const SymExpr width = SymExpr::constant(kColumnRows);
    c.grid[0] = (row_count(k) + width - SymExpr::constant(1)).floordiv(width);
    c.block = {kColumnRows, config.block / kColumnRows, 1};
    return c;
  }
  if (split > 1) {
    c.grid[0] = row_count(k);
    return c;
  }
  // Blocks loop over rows with a grid stride, so fewer blocks take several rows each.
  SymExpr per_block = SymExpr::constant(config.rows_per_block);
  c.grid[0] = config.rows_per_block == 1 ? row_count(k)
                                          : (row_count(k) + per_block - SymExpr::constant(1)).floordiv(per_block);
  return c;
}

}  // namespace

std::string row_cache_refusal(const kir::Kernel& k, const KernelConfig& c) {
  if (c.row_cache == 0) return "";
  const int R = c.row_cache;
  if (R < 1 || R > kMaxRowCache || (R & (R - 1)) != 0)
    return "row cache " + std::to_string(R) + " is not a power of two from 1 to " + std::to_string(kMaxRowCache);
  if (k.kind != kir::Kind::Reduction) return "only reductions keep their rows in registers";
  if (c.split > 1 || c.columns) return "a split or column reduction keeps no row in registers";
  RowCachePlan plan = plan_row_cache(k, emitc::plan_reduction(k));
  if (plan.registers == 0) return "no pass reads a value an earlier pass computed";
  if (plan.registers * R > kRowCacheRegisters)
    return "row cache " + std::to_string(R) + " would take " + std::to_string(plan.registers * R) +
           " registers per thread, more than " + std::to_string(kRowCacheRegisters);
  SymExpr len = row_length(k);
  if (len.is_constant() && len.constant_value() > int64_t{R} * c.block)
    return "a row of " + std::to_string(len.constant_value()) + " elements does not fit " + std::to_string(R) +
           " per thread of " + std::to_string(c.block);
  return "";
}

std::string emit_cuda(const std::vector<kir::Kernel>& kernels, const std::vector<KernelConfig>& configs) {
  TCC_CHECK(configs.empty() || configs.size() == kernels.size()) << "one config per kernel, or none";
  std::string out = "// Generated by tcc: CUDA kernels for NVRTC.\n";
  out += emitc::prelude(emitc::Target::Cuda, kernels);
  bool any_split = false, any_columns = false, any_template = false, any_mma = false, any_tf32 = false;
  for (size_t i = 0; i < kernels.size(); ++i) {
    KernelConfig c = config_of(kernels, configs, i);
    any_split |= kernels[i].kind == kir::Kind::Reduction && c.split > 1;
    any_columns |= kernels[i].kind == kir::Kind::Reduction && c.columns;
    any_template |= c.tile > 0;
    const bool tf32 = kernels[i].kind == kir::Kind::Attention && attention_tf32(kernels[i], c);
    any_mma |= kernels[i].kind == kir::Kind::Attention && c.mma && !tf32;
    any_tf32 |= tf32;
  }
  if (any_split) out += kCudaSplit;
  if (any_columns) out += kCudaColumns;
  if (any_template) out += kGemmTemplateHelpers;
  if (any_template || any_tf32) out += kMmaTf32Helper;
  if (any_mma) out += kAttentionMmaHelpers;
  if (any_tf32) out += kAttentionTf32Helpers;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kir::Kernel& k = kernels[i];
    KernelConfig c = config_of(kernels, configs, i);
    if (c.tile > 0) out += "\n" + emit_gemm_template(k, c);
    else if (const TemplateKernel* t = template_kernel(k.kind)) out += "\n" + t->emit_cuda(k, c);
    else if (!runs_library(k, c)) out += "\n" + CudaKernel(k, c).print();
  }
  return out;
}

bool runs_library(const kir::Kernel& k, const KernelConfig& config) {
  return k.kind == kir::Kind::Conv || (k.kind == kir::Kind::Gemm && config.tile == 0);
}

std::vector<std::vector<size_t>> shard_kernels(const std::vector<kir::Kernel>& kernels, std::vector<size_t> order,
                                               int units) {
  size_t groups = std::min(order.size(), static_cast<size_t>(std::max(units, 1)));
  if (groups < 2) return {};
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return kernels[a].body.size() > kernels[b].body.size(); });
  std::vector<std::vector<size_t>> out(groups);
  std::vector<size_t> load(groups, 0);
  for (size_t i : order) {
    size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[g] += kernels[i].body.size() + 1;
    out[g].push_back(i);
  }
  for (std::vector<size_t>& g : out) std::sort(g.begin(), g.end());
  return out;
}

bool reduces_columns(const kir::Kernel& k) {
  if (k.kind != kir::Kind::Reduction || k.reduce_axes < 1 || emitc::scans(k)) return false;
  size_t outer = k.domain.size() - static_cast<size_t>(k.reduce_axes);
  if (outer == 0) return false;
  const SymExpr one = SymExpr::constant(1), zero;
  bool strided = false;
  for (const kir::Instr& in : k.body) {
    if (in.op != Op::Load && in.op != Op::Store) continue;
    const std::vector<SymExpr>& s = in.index.strides;
    bool per_element = std::any_of(s.begin() + static_cast<std::ptrdiff_t>(outer), s.end(),
                                   [&](const SymExpr& stride) { return stride != zero; });
    if (!per_element) continue;
    if (in.dynamic >= 0 || (s[outer - 1] != one && s[outer - 1] != zero)) return false;
    strided |= s[outer - 1] == one && s.back() != one;
  }
  return strided;
}

bool splits_rows(const kir::Kernel& k) {
  if (k.kind != kir::Kind::Reduction) return false;
  emitc::ReductionPlan p = emitc::plan_reduction(k);
  return p.reductions.size() == 1 && p.passes.back().empty();
}

KernelLaunch launch_config(const kir::Kernel& k, const KernelConfig& config) {
  KernelLaunch c;
  if (const TemplateKernel* t = template_kernel(k.kind)) c = t->launch(k, config);
  else if (k.kind == kir::Kind::Pointwise) c = pointwise_launch(k, config);
  else if (k.kind == kir::Kind::Reduction) c = reduction_launch(k, config);
  else if (k.kind == kir::Kind::Gemm && config.tile > 0) c = gemm_template_launch(k, config);
  // cuBLASLt's gemms and cuDNN's convs launch no kernel of tcc's.
  c.zero_outputs = k.zero_outputs;
  c.copy_from = k.copy_from;
  c.random_offset = kir::draws_random(k);
  return c;
}

KernelLaunch launch_config(const kir::Kernel& k) { return launch_config(k, default_config(k)); }

}  // namespace tcc
