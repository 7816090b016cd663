// Ops that build grids or rearrange images: AffineGrid, Col2Im, MaxUnpool,
// CenterCropPad (the sampling ops, GridSample and DeformConv, are in
// sampling.cc).
//
// Shape rules keep batch and spatial dims symbolic where the op's formula
// allows; kernels are direct loops computing in double, as the rest of the
// interpreter.
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/ops/conv_pool.h"  // spatial_of
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// ---------------------------------------------------------------- AffineGrid

void infer_affine_grid(InferContext& ctx) {
  const Type& theta = ctx.ranked_input(0);
  require_index_vector(ctx, 1, "size");
  if (theta.rank() != 3) ctx.fail("expected theta of shape (N, 2, 3) or (N, 3, 4), got " + theta.str());
  std::optional<Dims> size = input_values(ctx, 1);
  const Type& size_type = ctx.input_type(1);
  int64_t nd = -1;  // spatial dims: 2 or 3
  if (size) nd = static_cast<int64_t>(size->size()) - 2;
  else if (size_type.has_rank() && size_type.shape()[0].is_static()) nd = size_type.shape()[0].value() - 2;
  else if (theta.shape()[1].is_static()) nd = theta.shape()[1].value();
  if (nd == -1) {
    ctx.set_output_type(0, Type::tensor_unranked(theta.dtype()));
    return;
  }
  if (nd != 2 && nd != 3) ctx.fail("expected size of 4 (N, C, H, W) or 5 (N, C, D, H, W) values, got " + std::to_string(nd + 2));
  auto expect = [&](size_t i, int64_t v) {
    const Dim& d = theta.shape()[i];
    if (d.is_static() && d.value() != v)
      ctx.fail("expected theta of shape (N, " + std::to_string(nd) + ", " + std::to_string(nd + 1) + ") for a " +
               std::to_string(nd) + "-D size, got " + theta.str());
  };
  expect(1, nd);
  expect(2, nd + 1);
  Dims out = {theta.shape()[0]};
  for (int64_t i = 0; i < nd; ++i) out.push_back(size ? (*size)[2 + i] : ctx.env().fresh("u"));
  out.push_back(Dim(nd));
  if (size && !ctx.env().unify(theta.shape()[0], (*size)[0], &ctx.node()))
    ctx.fail("expected theta " + theta.str() + " and size " + dims_str(*size) + " to have one batch size");
  ctx.set_output_type(0, Type::tensor(theta.dtype(), out));
}

// Position i of d along an axis, between -1 and 1: the centres of d cells, or
// (align_corners) d points from -1 to 1.
double grid_coordinate(int64_t i, int64_t d, bool align_corners) {
  if (align_corners) return d == 1 ? -1.0 : -1 + 2.0 * static_cast<double>(i) / static_cast<double>(d - 1);
  return -1 + (2.0 * static_cast<double>(i) + 1) / static_cast<double>(d);
}

// grid[n, ..., :] = theta[n] @ (x, y[, z], 1), with (x, y, z) the position's
// grid_coordinate (W's along x, H's along y, D's along z).
std::vector<Tensor> eval_affine_grid(EvalContext& ctx) {
  const Tensor& theta = ctx.input(0);
  std::vector<int64_t> size = ctx.input(1).to_i64_vector();
  int64_t align = ctx.node().get_int("align_corners", 0);
  if (align != 0 && align != 1) ctx.fail("expected align_corners 0 or 1, got " + std::to_string(align));
  if (size.size() != 4 && size.size() != 5)
    ctx.fail("expected size of 4 (N, C, H, W) or 5 (N, C, D, H, W) values, got " + std::to_string(size.size()));
  auto nd = static_cast<int64_t>(size.size()) - 2;
  if (theta.shape() != std::vector<int64_t>{size[0], nd, nd + 1})
    ctx.fail("expected theta of shape " + shape_str({size[0], nd, nd + 1}) + " for size " + shape_str(size) + ", got " +
             shape_str(theta.shape()));
  std::vector<int64_t> spatial(size.begin() + 2, size.end());
  if (std::any_of(spatial.begin(), spatial.end(), [](int64_t d) { return d < 0; }))
    ctx.fail("expected non-negative sizes, got " + shape_str(size));
  std::vector<int64_t> gshape = {size[0]};
  gshape.insert(gshape.end(), spatial.begin(), spatial.end());
  gshape.push_back(nd);
  Tensor grid(theta.dtype(), gshape);
  int64_t positions = product(spatial), at = 0;
  std::vector<double> homo(nd + 1, 1.0);
  for (int64_t b = 0; b < size[0]; ++b) {
    std::vector<int64_t> idx(nd, 0);
    for (int64_t p = 0; p < positions; ++p) {
      for (int64_t k = 0; k < nd; ++k) homo[k] = grid_coordinate(idx[nd - 1 - k], spatial[nd - 1 - k], align == 1);
      for (int64_t row = 0; row < nd; ++row) {
        double v = 0;
        for (int64_t col = 0; col <= nd; ++col) v += theta.get_f64((b * nd + row) * (nd + 1) + col) * homo[col];
        grid.set_f64(at++, v);
      }
      advance(idx, spatial);
    }
  }
  return {grid};
}

// ---------------------------------------------------------------- Col2Im

void infer_col2im(InferContext& ctx) {
  const Type& x = ctx.ranked_input(0);
  require_index_vector(ctx, 1, "image_shape");
  require_index_vector(ctx, 2, "block_shape");
  if (x.rank() != 3) ctx.fail("expected input of shape (N, C * block size, blocks), got " + x.str());
  require_numeric(ctx.node(), x.dtype(), "input");
  std::optional<Dims> image = input_values(ctx, 1);
  auto block = static_values(ctx.input_values(2));
  if (image && block && image->size() != block->size())
    ctx.fail("expected image_shape and block_shape of one length, got " + dims_str(*image) + " and " + shape_str(*block));
  if (!image) {
    ctx.set_output_type(0, Type::tensor_unranked(x.dtype()));
    return;
  }
  std::optional<SymExpr> channels;
  if (block && !x.shape()[1].is_unknown()) {
    channels = x.shape()[1].expr().exact_div(C(product(*block)));
    if (!channels) ctx.fail("expected input's dim 1 (" + x.shape()[1].str() + ") divisible by the block size " + shape_str(*block));
  }
  Dims out = {x.shape()[0], channels ? Dim(*channels) : ctx.env().fresh("u")};
  out.insert(out.end(), image->begin(), image->end());
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

// Col2Im's sliding window over the image: its blocks per axis, and the
// sizes of a block, of the blocks and of the image.
struct Col2ImLayout {
  std::vector<int64_t> image, block, blocks;
  int64_t bvol = 0, nblocks = 0, ivol = 0;
};

Col2ImLayout col2im_layout(const std::vector<int64_t>& image, const std::vector<int64_t>& block,
                           const SlidingWindow& sw) {
  Col2ImLayout out{image, block, std::vector<int64_t>(image.size())};
  for (size_t i = 0; i < image.size(); ++i) {
    int64_t span = image[i] + sw.begin[i] + sw.end[i] - sw.dilations[i] * (block[i] - 1) - 1;
    out.blocks[i] = span < 0 ? 0 : span / sw.strides[i] + 1;
  }
  out.bvol = product(block), out.nblocks = product(out.blocks), out.ivol = product(image);
  return out;
}

// For offset k of block l, the flat image pixel it adds to (at k * nblocks +
// l; -1 where it falls in the padding). Callers bound the layout's sizes
// first: this is bvol * nblocks entries.
std::vector<int64_t> col2im_pixels(const Col2ImLayout& layout, const SlidingWindow& sw) {
  const std::vector<int64_t> strides = row_major_strides(layout.image);
  const auto offsets = all_indices(layout.block);
  const auto positions = all_indices(layout.blocks);
  std::vector<int64_t> pixel(static_cast<size_t>(layout.bvol * layout.nblocks), -1);
  for (int64_t k = 0; k < layout.bvol; ++k)
    for (int64_t l = 0; l < layout.nblocks; ++l) {
      int64_t at = 0;
      bool inside = true;
      for (size_t i = 0; i < layout.image.size() && inside; ++i) {
        int64_t p = positions[l][i] * sw.strides[i] - sw.begin[i] + offsets[k][i] * sw.dilations[i];
        inside = p >= 0 && p < layout.image[i];
        at += p * strides[i];
      }
      if (inside) pixel[static_cast<size_t>(k * layout.nblocks + l)] = at;
    }
  return pixel;
}

// Each column's block of values is added into the image at the block's window
// position, blocks in row-major order of the sliding window's positions.
std::vector<Tensor> eval_col2im(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> image = ctx.input(1).to_i64_vector(), block = ctx.input(2).to_i64_vector();
  require_numeric(ctx.node(), x.dtype(), "input");
  if (x.rank() != 3) ctx.fail("expected input of shape (N, C * block size, blocks), got " + shape_str(x.shape()));
  if (image.size() != block.size() || image.empty())
    ctx.fail("expected image_shape and block_shape of one length, got " + shape_str(image) + " and " + shape_str(block));
  if (std::any_of(block.begin(), block.end(), [](int64_t b) { return b < 1; }) ||
      std::any_of(image.begin(), image.end(), [](int64_t d) { return d < 0; }))
    ctx.fail("expected positive block sizes and non-negative image sizes, got " + shape_str(block) + " and " + shape_str(image));
  SlidingWindow sw;
  if (std::string why = sliding_window(ctx.node(), block, image, &sw); !why.empty()) ctx.fail(why);
  const Col2ImLayout layout = col2im_layout(image, block, sw);
  const int64_t bvol = layout.bvol, nblocks = layout.nblocks, ivol = layout.ivol;
  if (x.shape()[1] % bvol != 0 || x.shape()[2] != nblocks)
    ctx.fail("expected input of shape (N, C * " + std::to_string(bvol) + ", " + std::to_string(nblocks) +
             ") for blocks " + shape_str(block) + " over image " + shape_str(image) + ", got " + shape_str(x.shape()));
  int64_t batch = x.shape()[0], channels = x.shape()[1] / bvol;
  std::vector<double> acc(batch * channels * ivol, 0.0);
  const std::vector<int64_t> pixel = col2im_pixels(layout, sw);
  for (int64_t bc = 0; bc < batch * channels; ++bc)
    for (int64_t k = 0; k < bvol; ++k)
      for (int64_t l = 0; l < nblocks; ++l)
        if (int64_t at = pixel[static_cast<size_t>(k * nblocks + l)]; at >= 0)
          acc[bc * ivol + at] += x.get_f64((bc * bvol + k) * nblocks + l);
  std::vector<int64_t> yshape = {batch, channels};
  yshape.insert(yshape.end(), image.begin(), image.end());
  Tensor y(x.dtype(), yshape);
  for (size_t i = 0; i < acc.size(); ++i) y.set_f64(static_cast<int64_t>(i), acc[i]);
  return {y};
}

// ---------------------------------------------------------------- MaxUnpool

struct UnpoolAttrs {
  std::vector<int64_t> kernel, strides, pads;
};

UnpoolAttrs unpool_attrs(const Node& n, size_t ns) {
  UnpoolAttrs a;
  a.kernel = n.get_ints("kernel_shape");
  a.strides = n.get_ints("strides", std::vector<int64_t>(ns, 1));
  a.pads = n.get_ints("pads", std::vector<int64_t>(2 * ns, 0));
  if (a.kernel.size() != ns || a.strides.size() != ns || a.pads.size() != 2 * ns)
    n.fail("expected kernel_shape and strides of " + std::to_string(ns) + " values and pads of " + std::to_string(2 * ns) +
           " (one per spatial dim), got " + shape_str(a.kernel) + ", " + shape_str(a.strides) + " and " + shape_str(a.pads));
  for (size_t i = 0; i < ns; ++i)
    if (a.kernel[i] < 1 || a.strides[i] < 1 || a.pads[i] < 0 || a.pads[ns + i] < 0)
      n.fail("expected positive kernel_shape and strides and non-negative pads");
  return a;
}

void infer_max_unpool(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  const Type& ind = ctx.ranked_input(1);
  require_index_vector(ctx, 2, "output_shape");
  size_t ns = x.rank() - 2;
  UnpoolAttrs a = unpool_attrs(ctx.node(), ns);
  if (ind.rank() != x.rank()) ctx.fail("expected I of X's shape " + x.str() + ", got " + ind.str());
  for (size_t i = 0; i < x.rank(); ++i)
    if (!ctx.env().unify(x.shape()[i], ind.shape()[i], &ctx.node()))
      ctx.fail("expected I of X's shape " + x.str() + ", got " + ind.str());
  Dims out;
  if (ctx.has_input(2)) {
    std::optional<Dims> os = input_values(ctx, 2);
    if (!os) {
      out.assign(x.rank(), Dim::unknown());
      for (Dim& d : out) d = ctx.env().fresh("u");
    } else if (os->size() != x.rank()) {
      ctx.fail("expected output_shape of " + std::to_string(x.rank()) + " values, got " + dims_str(*os));
    } else {
      out = *os;
    }
  } else {
    out = {x.shape()[0], x.shape()[1]};
    for (size_t i = 0; i < ns; ++i) {
      const Dim& in = x.shape()[2 + i];
      out.push_back(in.is_unknown() ? ctx.env().fresh("u")
                                    : Dim((in.expr() - C(1)) * C(a.strides[i]) +
                                          C(a.kernel[i] - a.pads[i] - a.pads[ns + i])));
    }
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

// X's elements go where I says in the output MaxPool's input would have had
// (I's flat indices count over that whole shape); the rest is zero. An
// output_shape places that shape at the origin of a larger zero output.
std::vector<Tensor> eval_max_unpool(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  check_nchw(ctx, x);
  size_t ns = x.rank() - 2;
  UnpoolAttrs a = unpool_attrs(ctx.node(), ns);
  if (ind.shape() != x.shape()) ctx.fail("expected I of X's shape " + shape_str(x.shape()) + ", got " + shape_str(ind.shape()));
  std::vector<int64_t> full = {x.shape()[0], x.shape()[1]};
  for (size_t i = 0; i < ns; ++i) full.push_back((x.shape()[2 + i] - 1) * a.strides[i] - a.pads[i] - a.pads[ns + i] + a.kernel[i]);
  std::vector<int64_t> out = ctx.has_input(2) ? ctx.input(2).to_i64_vector() : full;
  if (out.size() != full.size())
    ctx.fail("expected output_shape of " + std::to_string(full.size()) + " values, got " + shape_str(out));
  for (size_t i = 0; i < out.size(); ++i)
    if (full[i] < 0 || out[i] < full[i])
      ctx.fail("output_shape " + shape_str(out) + " is smaller than the unpooled shape " + shape_str(full));
  Tensor y(x.dtype(), out);
  std::vector<int64_t> ostr = row_major_strides(out);
  int64_t limit = product(full);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t at = ind.get_i64(i);
    if (at < 0 || at >= limit)
      ctx.fail("index " + std::to_string(at) + " in I is out of range for the unpooled shape " + shape_str(full));
    copy_element(y, flat_index(unravel_index(at, full), ostr), x, i);
  }
  return {y};
}

// ---------------------------------------------------------------- CenterCropPad

std::vector<int64_t> crop_pad_axes(const Node& n, int64_t rank) {
  std::vector<int64_t> axes = n.get_ints("axes");
  if (!n.has_attr("axes"))
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  for (auto& a : axes) a = normalize_axis(n, a, rank);
  return axes;
}

void infer_center_crop_pad(InferContext& ctx) {
  require_index_vector(ctx, 1, "shape");
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  std::vector<int64_t> axes = crop_pad_axes(ctx.node(), static_cast<int64_t>(x.rank()));
  std::optional<Dims> shape = input_values(ctx, 1);
  if (shape && shape->size() != axes.size())
    ctx.fail("expected shape of " + std::to_string(axes.size()) + " values (one per axis), got " + dims_str(*shape));
  Dims out = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    if (shape && (*shape)[i].is_static() && (*shape)[i].value() < 0)
      ctx.fail("expected non-negative sizes in shape, got " + dims_str(*shape));
    out[axes[i]] = shape ? (*shape)[i] : ctx.env().fresh("u");
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

// Along each axis a larger input is cropped to a window starting at
// floor((in - out) / 2); a smaller one is padded with zeros, floor((out - in) / 2)
// of them before it.
std::vector<Tensor> eval_center_crop_pad(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = ctx.input(1).to_i64_vector();
  std::vector<int64_t> axes = crop_pad_axes(ctx.node(), static_cast<int64_t>(x.rank()));
  if (shape.size() != axes.size())
    ctx.fail("expected shape of " + std::to_string(axes.size()) + " values (one per axis), got " + shape_str(shape));
  std::vector<int64_t> out = x.shape(), start(x.rank(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (shape[i] < 0) ctx.fail("expected non-negative sizes in shape, got " + shape_str(shape));
    int64_t diff = x.shape()[axes[i]] - shape[i];
    out[axes[i]] = shape[i];
    start[axes[i]] = diff >= 0 ? diff / 2 : -(-diff / 2);
  }
  std::vector<int64_t> xstr = row_major_strides(x.shape());
  Tensor zero(x.dtype(), {});
  return {remap(
      x, out,
      [&](const std::vector<int64_t>& idx) {
        int64_t at = 0;
        for (size_t k = 0; k < idx.size(); ++k) {
          int64_t s = idx[k] + start[k];
          if (s < 0 || s >= x.shape()[k]) return int64_t{-1};
          at += s * xstr[k];
        }
        return at;
      },
      &zero)};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// CenterCropPad: cropping and zero padding are each other's adjoint, and both
// put floor(|in - out| / 2) before, so dx = CenterCropPad(g, shape(x)) over
// every axis (those the forward left alone already have x's size).
void center_crop_pad_rule(GradContext& c) {
  c.set(0, c.e().op("CenterCropPad", {c.dy(), c.e().shape_of(c.in(0))}));
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// CenterCropPad(x, shape) -> a Slice of the centred window along the axes it
// crops, then a Pad with zeros along those it pads (floor(|in - out| / 2)
// before, the rest after), as the reference kernel places them. Needs shape
// constant and x's dims along the axes static.
bool decompose_center_crop_pad(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  std::optional<Tensor> shape = constant_value(n.input(1));
  if (!x.is_tensor() || !x.has_rank() || !shape) return false;
  auto rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes = crop_pad_axes(n, rank);
  if (shape->numel() != static_cast<int64_t>(axes.size())) return false;
  std::vector<int64_t> starts, ends, cropped, pads(2 * x.rank(), 0);
  Dims dims = x.shape();
  bool pad = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], want = shape->get_i64(static_cast<int64_t>(i));
    if (!dims[a].is_static() || want < 0) return false;
    int64_t diff = dims[a].value() - want;
    if (diff > 0) {
      cropped.push_back(a);
      starts.push_back(diff / 2);
      ends.push_back(diff / 2 + want);
    } else if (diff < 0) {
      pads[a] = -diff / 2;
      pads[a + rank] = -diff - pads[a];
      pad = true;
    }
  }
  if (cropped.empty() && !pad) {
    e.finish("Identity", "Identity", {n.input(0)});
    return true;
  }
  std::vector<Value*> slice = {n.input(0), e.i64s("starts", starts), e.i64s("ends", ends), e.i64s("axes", cropped)};
  if (!pad) {
    e.finish("Slice", "Slice", slice);
    return true;
  }
  Value* v = n.input(0);
  if (!cropped.empty()) {
    for (size_t i = 0; i < cropped.size(); ++i) dims[cropped[i]] = Dim(ends[i] - starts[i]);
    v = e.add("Slice", "Slice", slice, Type::tensor(x.dtype(), dims));
  }
  e.finish("Pad", "Pad", {v, e.i64s("pads", pads)});
  return true;
}

// Col2Im decomposes only while its [pixels, block size] index table stays this small.
constexpr int64_t kMaxCol2ImEntries = int64_t{1} << 22;

// Col2Im(input [N, C * B, L], image_shape, block_shape) -> y[n, c, q] = the
// sum, over the block offsets k whose window position l(k, q) lands on pixel
// q, of input[n, c * B + k, l]: input viewed as [N, C, B * L], one Gather
// along its last axis of a constant [pixels, B] table of k * L + l, times a
// constant 0/1 mask of the offsets that land, summed over k (ReduceSum).
// Each pixel adds its pieces in the reference's order, with no atomics, in
// any numeric dtype. Needs image_shape and block_shape constant, input's
// dims 1 and 2 static, and at most kMaxCol2ImEntries table entries.
bool decompose_col2im(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  std::optional<Tensor> image_given = constant_value(n.input(1)), block_given = constant_value(n.input(2));
  if (!x.is_tensor() || !x.has_rank() || x.rank() != 3 || !x.shape()[1].is_static() || !x.shape()[2].is_static() ||
      !image_given || !block_given)
    return false;
  std::vector<int64_t> image = image_given->to_i64_vector(), block = block_given->to_i64_vector();
  if (image.empty() || image.size() != block.size() ||
      std::any_of(block.begin(), block.end(), [](int64_t b) { return b < 1; }) ||
      std::any_of(image.begin(), image.end(), [](int64_t d) { return d < 0; }))
    return false;
  SlidingWindow sw;
  if (!sliding_window(n, block, image, &sw).empty()) return false;
  const Col2ImLayout layout = col2im_layout(image, block, sw);
  const int64_t bvol = layout.bvol, nblocks = layout.nblocks, ivol = layout.ivol;
  if (x.shape()[1].value() % bvol != 0 || x.shape()[2].value() != nblocks || nblocks == 0 || ivol == 0 ||
      ivol > kMaxCol2ImEntries / bvol)
    return false;
  const Dim batch = x.shape()[0], channels(x.shape()[1].value() / bvol);
  std::vector<int64_t> table(static_cast<size_t>(ivol * bvol), 0);
  std::vector<double> lands(table.size(), 0.0);
  const std::vector<int64_t> pixel = col2im_pixels(layout, sw);
  for (int64_t k = 0; k < bvol; ++k)
    for (int64_t l = 0; l < nblocks; ++l) {
      const int64_t q = pixel[static_cast<size_t>(k * nblocks + l)];
      if (q < 0) continue;
      table[static_cast<size_t>(q * bvol + k)] = k * nblocks + l;
      lands[static_cast<size_t>(q * bvol + k)] = 1.0;
    }
  const Type pieces = Type::tensor(x.dtype(), {batch, channels, Dim(ivol), Dim(bvol)});
  Value* rows = e.reshape("Reshape", n.input(0), {batch, channels, Dim(bvol * nblocks)});
  Value* read = e.add("Gather", "Gather", {rows, e.constant("table", Tensor::from_i64(table, {ivol, bvol}))}, pieces,
                      {{"axis", Attribute::of_int(2)}});
  Value* landed = e.add("Mul", "Mul", {read, e.numbers("lands", lands, {ivol, bvol}, x.dtype())}, pieces);
  e.finish_reshape("Reshape_1", e.reduce("ReduceSum", "ReduceSum", landed, {3}, Expansion::kept_type(pieces, {3})));
  return true;
}

// AffineGrid(theta, size) -> MatMul of the constant base grid [positions,
// nd + 1] (each position's grid_coordinate x, y[, z], then 1) by theta
// transposed to [N, nd + 1, nd], viewed as [N, spatial..., nd]. Needs a float
// theta and size constant.
bool decompose_affine_grid(Expansion& e) {
  const Node& n = e.node();
  const Type* theta = e.ranked_float_input(0);
  std::optional<Tensor> size = constant_value(n.input(1));
  int64_t align = n.get_int("align_corners", 0);
  if (theta == nullptr || theta->rank() != 3 || !size || (size->numel() != 4 && size->numel() != 5) ||
      (align != 0 && align != 1))
    return false;
  std::vector<int64_t> spatial = size->to_i64_vector();
  spatial.erase(spatial.begin(), spatial.begin() + 2);
  auto nd = static_cast<int64_t>(spatial.size());
  if (std::any_of(spatial.begin(), spatial.end(), [](int64_t d) { return d < 0; })) return false;
  int64_t positions = product(spatial);
  Tensor base(theta->dtype(), {positions, nd + 1});
  std::vector<int64_t> idx(spatial.size(), 0);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t k = 0; k < nd; ++k)
      base.set_f64(p * (nd + 1) + k, grid_coordinate(idx[nd - 1 - k], spatial[nd - 1 - k], align == 1));
    base.set_f64(p * (nd + 1) + nd, 1.0);
    advance(idx, spatial);
  }
  const Dim& batch = theta->shape()[0];
  Value* turned = e.add("Transpose", "Transpose", {n.input(0)}, Type::tensor(theta->dtype(), {batch, nd + 1, nd}),
                        {{"perm", Attribute::of_ints({0, 2, 1})}});
  Value* grid = e.add("MatMul", "MatMul", {e.constant("base_grid", std::move(base)), turned},
                      Type::tensor(theta->dtype(), {batch, positions, nd}));
  e.finish_reshape("Reshape", grid);
  return true;
}

// MaxUnpool(X, I, output_shape) -> ScatterElements of X's elements, at I's
// flat indices, into zeros (a tcc::Expand of 0) of the unpooled shape's
// elements, viewed as that shape, and zero padded after it up to
// output_shape. Needs X's shape static and output_shape constant or absent.
// Unlike the reference kernel, it does not check I's indices.
bool decompose_max_unpool(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() < 3 || !x.fully_static()) return false;
  size_t ns = x.rank() - 2;
  UnpoolAttrs a = unpool_attrs(n, ns);
  std::vector<int64_t> full = {x.shape()[0].value(), x.shape()[1].value()};
  for (size_t i = 0; i < ns; ++i)
    full.push_back((x.shape()[2 + i].value() - 1) * a.strides[i] - a.pads[i] - a.pads[ns + i] + a.kernel[i]);
  std::vector<int64_t> out = full;
  if (n.num_inputs() > 2 && n.has_input(2)) {
    std::optional<Tensor> given = constant_value(n.input(2));
    if (!given) return false;
    out = given->to_i64_vector();
  }
  if (out.size() != full.size()) return false;
  for (size_t i = 0; i < out.size(); ++i)
    if (full[i] < 0 || out[i] < full[i]) return false;
  int64_t numel = 1;
  for (const Dim& d : x.shape()) numel *= d.value();
  int64_t elements = product(full);
  Type scattered_type = Type::tensor(x.dtype(), {Dim(elements)});
  Value* zeros = e.expand("Expand", e.scalar("zero", 0, x.dtype()), {Dim(elements)});
  Value* at = e.reshape("Reshape", n.input(1), {Dim(numel)});
  Value* values = e.reshape("Reshape_1", n.input(0), {Dim(numel)});
  Value* scattered = e.add("ScatterElements", "ScatterElements", {zeros, at, values}, scattered_type,
                           {{"axis", Attribute::of_int(0)}});
  if (out == full) {
    e.finish_reshape("Reshape_2", scattered);
    return true;
  }
  std::vector<int64_t> pads(2 * out.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) pads[out.size() + i] = out[i] - full[i];
  e.finish("Pad", "Pad", {e.reshape("Reshape_2", scattered, dims_of(full)), e.i64s("pads", pads)});
  return true;
}

}  // namespace

void register_spatial_ops(OpRegistry& r) {
  r.add(OpDef{"", "AffineGrid", 20, 0, infer_affine_grid, eval_affine_grid, {}})
      .shape_from_inputs({1})
      .decomposition(decompose_affine_grid);
  r.add(OpDef{"", "Col2Im", 18, 0, infer_col2im, eval_col2im, kNumeric})
      .shape_from_inputs({1, 2})
      .decomposition(decompose_col2im)
      .trains_through_decomposition();
  r.add(OpDef{"", "MaxUnpool", 9, kMovement, infer_max_unpool, eval_max_unpool, {}})
      .shape_from_inputs({2})
      .decomposition(decompose_max_unpool);
  r.add(OpDef{"", "CenterCropPad", 18, kMovement, infer_center_crop_pad, eval_center_crop_pad, {}})
      .shape_from_inputs({1})
      .gradient(center_crop_pad_rule)
      .decomposition(decompose_center_crop_pad);
}

}  // namespace tcc
