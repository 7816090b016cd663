// Object-detection ops: RoiAlign and MaxRoiPool (pooling over regions of an
// image) and NonMaxSuppression (whose output size depends on the scores, so
// it carries kDataDependentShape and its count is a fresh symbol, as NonZero's).
// RoiAlign and MaxRoiPool decompose into a Gather of X and reductions over
// each bin (RoiAlign of adaptive samples into tcc::RoiAlign, its kernel),
// NonMaxSuppression into tcc::NmsSelect, its selection kernel,
// around a NonZero (at the end of the file).
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// Fails unless t is (rows, cols) with cols static `cols` where known; `what` names it.
void require_matrix(InferContext& ctx, const Type& t, int64_t cols, const std::string& what) {
  if (t.rank() != 2 || (t.shape()[1].is_static() && t.shape()[1].value() != cols))
    ctx.fail("expected " + what + " of shape (num_rois, " + std::to_string(cols) + "), got " + t.str());
}

// Y = (num_rois, C, height, width) for an X of rank 4 and rois whose first dim counts the regions.
void set_pooled_output(InferContext& ctx, const Type& x, const Type& rois, int64_t height, int64_t width) {
  if (height < 1 || width < 1)
    ctx.fail("expected positive output sizes, got " + std::to_string(height) + " x " + std::to_string(width));
  ctx.set_output_type(0, Type::tensor(x.dtype(), {rois.shape()[0], x.shape()[1], Dim(height), Dim(width)}));
}

// ---------------------------------------------------------------- RoiAlign

struct RoiAlignAttrs {
  bool max = false, half_pixel = true;
  int64_t height = 1, width = 1, sampling_ratio = 0;
  double spatial_scale = 1;
};

// Before opset 16 RoiAlign had no coordinate_transformation_mode and behaved
// as output_half_pixel does; tcc::RoiAlign always has one.
RoiAlignAttrs roi_align_attrs(const Node& n) {
  RoiAlignAttrs a;
  std::string mode = n.get_string("mode", "avg");
  std::string coord = n.opset() >= 16 || n.domain() == kTccDomain
                          ? n.get_string("coordinate_transformation_mode", "half_pixel")
                          : "output_half_pixel";
  if (mode != "avg" && mode != "max") n.fail("expected mode avg or max, got '" + mode + "'");
  if (coord != "half_pixel" && coord != "output_half_pixel")
    n.fail("expected coordinate_transformation_mode half_pixel or output_half_pixel, got '" + coord + "'");
  a.max = mode == "max";
  a.half_pixel = coord == "half_pixel";
  a.height = n.get_int("output_height", 1);
  a.width = n.get_int("output_width", 1);
  a.sampling_ratio = n.get_int("sampling_ratio", 0);
  a.spatial_scale = n.get_float("spatial_scale", 1.0f);
  if (a.height < 1 || a.width < 1 || a.sampling_ratio < 0)
    n.fail("expected positive output_height and output_width and a non-negative sampling_ratio");
  return a;
}

void infer_roi_align(InferContext& ctx) {
  const Type& x = ctx.ranked_input(0);
  const Type& rois = ctx.ranked_input(1);
  const Type& ind = ctx.ranked_input(2);
  RoiAlignAttrs a = roi_align_attrs(ctx.node());
  if (x.rank() != 4) ctx.fail("expected X of shape (N, C, H, W), got " + x.str());
  require_matrix(ctx, rois, 4, "rois");
  if (ind.rank() != 1 || !ctx.env().unify(ind.shape()[0], rois.shape()[0], &ctx.node()))
    ctx.fail("expected batch_indices of shape (num_rois) for rois " + rois.str() + ", got " + ind.str());
  set_pooled_output(ctx, x, rois, a.height, a.width);
}

// One sampling point's four bilinear taps (flat offsets in an H x W plane) and weights.
struct BilinearPoint {
  int64_t at[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

// The point (y, x) of an h x w plane as RoiAlign reads it: a point more than
// one pixel outside reads zero; one nearer is moved onto the edge.
BilinearPoint roi_point(double y, double x, int64_t h, int64_t w) {
  BilinearPoint p;
  if (!(y >= -1.0 && y <= static_cast<double>(h) && x >= -1.0 && x <= static_cast<double>(w))) return p;  // NaN too
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);
  int64_t y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) y = static_cast<double>(y0 = y1 = h - 1);
  if (x0 >= w - 1) x = static_cast<double>(x0 = x1 = w - 1);
  double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  p.at[0] = y0 * w + x0;
  p.at[1] = y0 * w + x1;
  p.at[2] = y1 * w + x0;
  p.at[3] = y1 * w + x1;
  p.w[0] = (1 - ly) * (1 - lx);
  p.w[1] = (1 - ly) * lx;
  p.w[2] = ly * (1 - lx);
  p.w[3] = ly * lx;
  return p;
}

// Each output bin of a region averages (or takes the max of) a grid of
// bilinear samples: sampling_ratio per side, or ceil(bin size) when it is 0.
// The max mode takes the largest weighted tap of each sample, as ONNX's
// reference and onnxruntime do. A batch index outside X fails RoiAlign; in
// tcc::RoiAlign, which runs on a kernel that cannot fail, its region is 0.
std::vector<Tensor> eval_roi_align(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& ind = ctx.input(2);
  RoiAlignAttrs a = roi_align_attrs(ctx.node());
  if (x.rank() != 4) ctx.fail("expected X of shape (N, C, H, W), got " + shape_str(x.shape()));
  if (rois.rank() != 2 || rois.shape()[1] != 4 || ind.shape() != std::vector<int64_t>{rois.shape()[0]})
    ctx.fail("expected rois of shape (num_rois, 4) and batch_indices of shape (num_rois), got " + shape_str(rois.shape()) +
             " and " + shape_str(ind.shape()));
  int64_t num_rois = rois.shape()[0], channels = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  Tensor y(x.dtype(), {num_rois, channels, a.height, a.width});
  double shift = a.half_pixel ? 0.5 : 0.0;
  std::vector<BilinearPoint> points;
  for (int64_t r = 0; r < num_rois; ++r) {
    int64_t b = ind.get_i64(r);
    if (b < 0 || b >= x.shape()[0]) {
      if (ctx.node().domain() == kTccDomain) continue;
      ctx.fail("batch index " + std::to_string(b) + " is out of range for X " + shape_str(x.shape()));
    }
    double x0 = rois.get_f64(r * 4) * a.spatial_scale - shift, y0 = rois.get_f64(r * 4 + 1) * a.spatial_scale - shift;
    double rw = rois.get_f64(r * 4 + 2) * a.spatial_scale - shift - x0;
    double rh = rois.get_f64(r * 4 + 3) * a.spatial_scale - shift - y0;
    if (!a.half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bin_h = rh / static_cast<double>(a.height), bin_w = rw / static_cast<double>(a.width);
    // Bounded so that a huge region cannot ask for billions of samples per bin (and a NaN one asks for none).
    auto grid = [&](double bin) {
      double n = std::ceil(bin);
      return a.sampling_ratio > 0 ? a.sampling_ratio : n > 0 ? static_cast<int64_t>(std::min(n, 1e4)) : int64_t{0};
    };
    int64_t gh = grid(bin_h), gw = grid(bin_w);
    double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ph = 0; ph < a.height; ++ph)
      for (int64_t pw = 0; pw < a.width; ++pw) {
        points.clear();
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix)
            points.push_back(roi_point(y0 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(gh),
                                       x0 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(gw),
                                       h, w));
        for (int64_t c = 0; c < channels; ++c) {
          int64_t plane = (b * channels + c) * h * w;
          double v = 0;
          for (size_t i = 0; i < points.size(); ++i) {
            const BilinearPoint& p = points[i];
            if (a.max) {
              double m = p.w[0] * x.get_f64(plane + p.at[0]);
              for (int k = 1; k < 4; ++k) m = std::max(m, p.w[k] * x.get_f64(plane + p.at[k]));
              v = i == 0 ? m : std::max(v, m);
            } else {
              for (int k = 0; k < 4; ++k) v += p.w[k] * x.get_f64(plane + p.at[k]);
            }
          }
          y.set_f64(((r * channels + c) * a.height + ph) * a.width + pw, a.max ? v : v / count);
        }
      }
  }
  return {y};
}

// ---------------------------------------------------------------- MaxRoiPool

std::vector<int64_t> pooled_shape(const Node& n) {
  if (!n.has_attr("pooled_shape")) n.fail("attribute pooled_shape is required");
  std::vector<int64_t> s = n.get_ints("pooled_shape");
  if (s.size() != 2 || s[0] < 1 || s[1] < 1) n.fail("expected pooled_shape of two positive sizes, got " + shape_str(s));
  return s;
}

void infer_max_roi_pool(InferContext& ctx) {
  const Type& x = ctx.ranked_input(0);
  const Type& rois = ctx.ranked_input(1);
  require_one_dtype(ctx, 0, {1});
  std::vector<int64_t> ps = pooled_shape(ctx.node());
  if (x.rank() != 4) ctx.fail("expected X of shape (N, C, H, W), got " + x.str());
  require_matrix(ctx, rois, 5, "rois");
  set_pooled_output(ctx, x, rois, ps[0], ps[1]);
}

// Fast R-CNN's region pooling: a region's corners [batch, x1, y1, x2, y2]
// are scaled and rounded to pixels (both ends included); each output bin is
// the max over its share of them, floor to ceil, clipped to the image; an
// empty bin is 0.
std::vector<Tensor> eval_max_roi_pool(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  std::vector<int64_t> ps = pooled_shape(ctx.node());
  double scale = ctx.node().get_float("spatial_scale", 1.0f);
  if (x.rank() != 4) ctx.fail("expected X of shape (N, C, H, W), got " + shape_str(x.shape()));
  if (rois.rank() != 2 || rois.shape()[1] != 5)
    ctx.fail("expected rois of shape (num_rois, 5), got " + shape_str(rois.shape()));
  int64_t num_rois = rois.shape()[0], channels = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  Tensor y(x.dtype(), {num_rois, channels, ps[0], ps[1]});
  // Rounded region corners, bounded so that a wild coordinate cannot overflow.
  auto corner = [&](int64_t r, int64_t k) {
    double v = std::round(rois.get_f64(r * 5 + k) * scale);
    if (std::isnan(v)) ctx.fail("region " + std::to_string(r) + " in rois has a NaN coordinate");
    return static_cast<int64_t>(std::clamp(v, -1e15, 1e15));
  };
  for (int64_t r = 0; r < num_rois; ++r) {
    double bf = rois.get_f64(r * 5);
    if (!(bf >= 0 && bf < static_cast<double>(x.shape()[0])))
      ctx.fail("batch index " + std::to_string(bf) + " in rois is out of range for X " + shape_str(x.shape()));
    auto b = static_cast<int64_t>(bf);
    int64_t x1 = corner(r, 1), y1 = corner(r, 2), x2 = corner(r, 3), y2 = corner(r, 4);
    double bin_h = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(ps[0]);
    double bin_w = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(ps[1]);
    auto span = [](int64_t i, double bin, int64_t start, int64_t size) {
      auto lo = static_cast<int64_t>(std::floor(static_cast<double>(i) * bin)) + start;
      auto hi = static_cast<int64_t>(std::ceil(static_cast<double>(i + 1) * bin)) + start;
      return std::pair<int64_t, int64_t>{std::clamp<int64_t>(lo, 0, size), std::clamp<int64_t>(hi, 0, size)};
    };
    for (int64_t c = 0; c < channels; ++c) {
      int64_t plane = (b * channels + c) * h * w;
      for (int64_t ph = 0; ph < ps[0]; ++ph)
        for (int64_t pw = 0; pw < ps[1]; ++pw) {
          auto [hs, he] = span(ph, bin_h, y1, h);
          auto [ws, we] = span(pw, bin_w, x1, w);
          double m = he > hs && we > ws ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t i = hs; i < he; ++i)
            for (int64_t j = ws; j < we; ++j) m = std::max(m, x.get_f64(plane + i * w + j));
          y.set_f64(((r * channels + c) * ps[0] + ph) * ps[1] + pw, m);
        }
    }
  }
  return {y};
}

// ---------------------------------------------------------------- NonMaxSuppression

// Checks NonMaxSuppression's (and tcc::NmsSelect's) boxes and scores.
void check_nms_operands(InferContext& ctx) {
  const Type& boxes = ctx.ranked_input(0);
  const Type& scores = ctx.ranked_input(1);
  int64_t center = ctx.node().get_int("center_point_box", 0);
  if (center != 0 && center != 1) ctx.fail("expected center_point_box 0 or 1, got " + std::to_string(center));
  const Dim& corners = boxes.rank() == 3 ? boxes.shape()[2] : Dim(4);
  if (boxes.rank() != 3 || (corners.is_static() && corners.value() != 4))
    ctx.fail("expected boxes of shape (num_batches, num_boxes, 4), got " + boxes.str());
  if (scores.rank() != 3 || !ctx.env().unify(boxes.shape()[0], scores.shape()[0], &ctx.node()) ||
      !ctx.env().unify(boxes.shape()[1], scores.shape()[2], &ctx.node()))
    ctx.fail("expected scores of shape (num_batches, num_classes, num_boxes) for boxes " + boxes.str() + ", got " +
             scores.str());
}

void infer_nms(InferContext& ctx) {
  check_nms_operands(ctx);
  ctx.set_output_type(0, Type::tensor(DType::I64, {ctx.env().fresh("u"), Dim(3)}));
}

// tcc::NmsSelect: per batch and class, the box selected at each place (-1
// past the count), [batch, classes, boxes], and the count, [batch, classes].
void infer_nms_select(InferContext& ctx) {
  check_nms_operands(ctx);
  const Dims& scores = ctx.input_type(1).shape();
  ctx.set_output_type(0, Type::tensor(DType::I64, scores));
  ctx.set_output_type(1, Type::tensor(DType::I64, {scores[0], scores[1]}));
}

// A box as its x and y extents, whichever corners or center format it came in.
struct Box {
  double x0, x1, y0, y1;
  double area() const { return (x1 - x0) * (y1 - y0); }
};

Box read_box(const Tensor& boxes, int64_t at, bool center) {
  double a = boxes.get_f64(at), b = boxes.get_f64(at + 1), c = boxes.get_f64(at + 2), d = boxes.get_f64(at + 3);
  if (center) return {a - c / 2, a + c / 2, b - d / 2, b + d / 2};  // [x_center, y_center, width, height]
  return {std::min(b, d), std::max(b, d), std::min(a, c), std::max(a, c)};  // [y1, x1, y2, x2], any diagonal
}

// Whether IoU(p, q) > threshold; boxes that do not overlap, or have no area, never suppress.
bool overlaps(const Box& p, const Box& q, double threshold) {
  double w = std::min(p.x1, q.x1) - std::max(p.x0, q.x0), h = std::min(p.y1, q.y1) - std::max(p.y0, q.y0);
  if (w <= 0 || h <= 0) return false;
  double inter = w * h, uni = p.area() + q.area() - inter;
  if (p.area() <= 0 || q.area() <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// Optional scalar input i: its one value, or `def` when it is absent or empty.
double optional_scalar(EvalContext& ctx, size_t i, double def) {
  if (!ctx.has_input(i) || ctx.input(i).numel() == 0) return def;
  if (ctx.input(i).numel() != 1) ctx.fail("expected input " + std::to_string(i) + " to be a scalar, got shape " + shape_str(ctx.input(i).shape()));
  return ctx.input(i).get_f64(0);
}

// Per batch and class: boxes above score_threshold in descending score order
// (ties: the lower box index first), each kept unless its IoU with a box kept
// before exceeds iou_threshold, up to max_output_boxes_per_class (default 0).
// The selected boxes of each (batch, class), batch-major.
std::vector<std::vector<int64_t>> nms_selections(EvalContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  bool center = ctx.node().get_int("center_point_box", 0) == 1;
  if (boxes.rank() != 3 || boxes.shape()[2] != 4 || scores.rank() != 3 || scores.shape()[0] != boxes.shape()[0] ||
      scores.shape()[2] != boxes.shape()[1])
    ctx.fail("expected boxes (num_batches, num_boxes, 4) and scores (num_batches, num_classes, num_boxes), got " +
             shape_str(boxes.shape()) + " and " + shape_str(scores.shape()));
  bool has_max = ctx.has_input(2) && ctx.input(2).numel() > 0;
  int64_t max_out = has_max ? std::max<int64_t>(ctx.input(2).get_i64(0), 0) : 0;
  if (has_max && ctx.input(2).numel() != 1) ctx.fail("expected max_output_boxes_per_class to be a scalar");
  double iou = optional_scalar(ctx, 3, 0.0);
  bool filter = ctx.has_input(4) && ctx.input(4).numel() > 0;
  double score_min = optional_scalar(ctx, 4, 0.0);
  int64_t batches = boxes.shape()[0], n = boxes.shape()[1], classes = scores.shape()[1];
  std::vector<std::vector<int64_t>> selected;
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      // NaN scores sort last, so the order stays a strict weak one.
      auto score = [&](int64_t i) {
        double s = scores.get_f64((b * classes + c) * n + i);
        return std::isnan(s) ? -std::numeric_limits<double>::infinity() : s;
      };
      order.clear();
      for (int64_t i = 0; i < n; ++i)
        if (!filter || score(i) > score_min) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return score(i) > score(j); });
      kept.clear();
      selected.emplace_back();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        Box box = read_box(boxes, (b * n + i) * 4, center);
        if (std::any_of(kept.begin(), kept.end(), [&](const Box& k) { return overlaps(box, k, iou); })) continue;
        kept.push_back(box);
        selected.back().push_back(i);
      }
    }
  return selected;
}

// The triples (batch, class, box). The iou_threshold is checked here, not in
// nms_selections: tcc::NmsSelect, which cannot fail on the device, takes any.
std::vector<Tensor> eval_nms(EvalContext& ctx) {
  const double iou = optional_scalar(ctx, 3, 0.0);
  if (!(iou >= 0 && iou <= 1)) ctx.fail("expected iou_threshold in [0, 1], got " + std::to_string(iou));
  const std::vector<std::vector<int64_t>> selections = nms_selections(ctx);
  const int64_t classes = ctx.input(1).shape()[1];
  std::vector<int64_t> triples;
  for (size_t r = 0; r < selections.size(); ++r) {
    const auto row = static_cast<int64_t>(r);
    for (int64_t i : selections[r]) triples.insert(triples.end(), {row / classes, row % classes, i});
  }
  return {Tensor::from_i64(triples, {static_cast<int64_t>(triples.size() / 3), 3})};
}

std::vector<Tensor> eval_nms_select(EvalContext& ctx) {
  const std::vector<std::vector<int64_t>> selections = nms_selections(ctx);
  const std::vector<int64_t>& shape = ctx.input(1).shape();
  const int64_t n = shape[2];
  Tensor selected(DType::I64, shape), count(DType::I64, {shape[0], shape[1]});
  for (size_t r = 0; r < selections.size(); ++r) {
    const auto row = static_cast<int64_t>(r);
    const auto found = static_cast<int64_t>(selections[r].size());
    for (int64_t p = 0; p < n; ++p)
      selected.set_i64(row * n + p, p < found ? selections[r][static_cast<size_t>(p)] : -1);
    count.set_i64(row, found);
  }
  return {selected, count};
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// Taps of more samples than this make RoiAlign's gathered tensor too large to decompose.
constexpr int64_t kMaxRoiAlignTaps = 64;

// What RoiAlign's and MaxRoiPool's decompositions need of their node: X,
// 4-D and float with known dims (returned), float rois and an output of known
// shape; null otherwise.
const Type* region_image(const Expansion& e) {
  const Type* x = e.ranked_float_input(0);
  const Type& rois = e.node().input(1)->type();
  const Type& y = e.node().output(0)->type();
  if (x == nullptr || x->rank() != 4 || !rois.is_tensor() || !is_float(rois.dtype()) || !y.is_tensor() ||
      !y.fully_shaped())
    return nullptr;
  return x;
}

// RoiAlign -> one Gather of X's elements at every sample's four bilinear
// taps, times their weights, reduced per bin: ReduceSum divided by the
// sample count (avg) or ReduceMax (max). The taps are separable: per axis
// (y from rois' columns 1 and 3 over H, x from 0 and 2 over W), in f64 as
// the reference computes, each region's scaled start and extent give its
// sample coordinates [R, bins, samples]; a coordinate more than one pixel
// outside reads nothing (weight and index 0), others are clamped at 0 and
// at the last pixel (roi_point), giving two indices and the weights 1 - frac
// and frac. The flat index of X's element is then batch_index * C*H*W +
// channel * H*W + y * W + x over [R, C, bins_y, bins_x, taps_y, taps_x].
// Needs C, H and W static and a positive sampling_ratio of at most
// kMaxRoiAlignTaps taps a bin. Otherwise (with 0 the sample count is
// ceil(bin size), read from the rois) the node becomes tcc::RoiAlign, its
// kernel (codegen/roi_align_template.h), for an f32 or f64 X (f16 and bf16
// cast to f64 and the result back): the same
// attributes, the coordinate_transformation_mode the opset implies spelled
// out (not for autodiff: the kernel has no gradient). Unlike the reference
// kernel, neither checks batch_indices.
bool decompose_roi_align(Expansion& e) {
  const Node& n = e.node();
  const Type* x = region_image(e);
  if (x == nullptr) return false;
  const Type& y = n.output(0)->type();
  const RoiAlignAttrs a = roi_align_attrs(n);
  const Dims& xd = x->shape();
  if (a.sampling_ratio == 0 || 4 * a.sampling_ratio * a.sampling_ratio > kMaxRoiAlignTaps || !xd[1].is_static() ||
      !xd[2].is_static() || !xd[3].is_static()) {
    const Type& ind = n.input(2)->type();
    const DType t = x->dtype();
    if (e.differentiates() || n.input(1)->type().dtype() != t || !ind.is_tensor() || ind.dtype() != DType::I64)
      return false;
    std::map<std::string, Attribute> attrs = {
        {"mode", Attribute::of_string(a.max ? "max" : "avg")},
        {"coordinate_transformation_mode", Attribute::of_string(a.half_pixel ? "half_pixel" : "output_half_pixel")},
        {"output_height", Attribute::of_int(a.height)},
        {"output_width", Attribute::of_int(a.width)},
        {"sampling_ratio", Attribute::of_int(a.sampling_ratio)},
        {"spatial_scale", Attribute::of_float(static_cast<float>(a.spatial_scale))}};
    if (t == DType::F32 || t == DType::F64) {
      e.finish("", "RoiAlign", {n.input(0), n.input(1), n.input(2)}, std::move(attrs), std::string(kTccDomain));
      return true;
    }
    if (t != DType::F16 && t != DType::BF16) return false;
    // f16 and bf16 through f64, which holds them exactly: one rounding, at the end, as the reference's.
    Value* wide = e.add("RoiAlign", "RoiAlign",
                        {e.cast("Cast_x", n.input(0), DType::F64), e.cast("Cast_rois", n.input(1), DType::F64),
                         n.input(2)},
                        Type::tensor(DType::F64, y.shape()), std::move(attrs), std::string(kTccDomain));
    e.take_over(0, e.cast("Cast_y", wide, t));
    return true;
  }
  const int64_t channels = xd[1].value(), h = xd[2].value(), w = xd[3].value(), s = a.sampling_ratio;
  const Dim regions = y.shape()[0];
  auto f64 = [](const Dims& d) { return Type::tensor(DType::F64, d); };
  auto number = [&](const std::string& hint, double v) { return e.scalar(hint, v, DType::F64); };
  Value* scaled =
      e.add("Mul_scale", "Mul", {e.cast("Cast_rois", n.input(1), DType::F64), number("scale", a.spatial_scale)},
            f64({regions, Dim(4)}));
  if (a.half_pixel) scaled = e.add("Sub_half", "Sub", {scaled, number("half", 0.5)}, f64({regions, Dim(4)}));

  // One axis's taps of the samples of every region and bin, each [R, bins, samples, 2].
  struct AxisTaps {
    Value* index;
    Value* weight;
  };
  auto axis_taps = [&](const std::string& t, int64_t first, int64_t bins, int64_t size) {
    const Dims column = {regions, Dim(1)}, samples = {regions, Dim(bins), Dim(s)},
               taps = {regions, Dim(bins), Dim(s), Dim(2)};
    auto corner = [&](const std::string& c, int64_t col) {
      Value* v =
          e.add("Slice_" + c + t, "Slice",
                {scaled, e.i64("starts_" + c + t, col), e.i64("ends_" + c + t, col + 1), e.i64("axes_" + c + t, 1)},
                f64(column));
      return e.reshape("Reshape_" + c + t, v, {regions, Dim(1), Dim(1)});
    };
    Value* start = corner("start", first);
    Value* extent = e.add("Sub_extent" + t, "Sub", {corner("end", first + 2), start}, f64({regions, Dim(1), Dim(1)}));
    if (!a.half_pixel)
      extent = e.add("Max_extent" + t, "Max", {extent, number("one" + t, 1)}, f64({regions, Dim(1), Dim(1)}));
    Value* bin = e.add("Div_bin" + t, "Div", {extent, number("bins" + t, static_cast<double>(bins))},
                       f64({regions, Dim(1), Dim(1)}));
    // start + bin * b + (i + 0.5) * bin / s, as the reference sums them.
    std::vector<double> bin_offsets, sample_offsets;
    for (int64_t b = 0; b < bins; ++b) bin_offsets.push_back(static_cast<double>(b));
    for (int64_t i = 0; i < s; ++i) sample_offsets.push_back(static_cast<double>(i) + 0.5);
    Value* to_bin =
        e.add("Mul_bin" + t, "Mul", {bin, e.numbers("bin_offsets" + t, bin_offsets, {1, bins, 1}, DType::F64)},
              f64({regions, Dim(bins), Dim(1)}));
    Value* to_sample =
        e.add("Mul_sample" + t, "Mul", {bin, e.numbers("sample_offsets" + t, sample_offsets, {1, 1, s}, DType::F64)},
              f64({regions, Dim(1), Dim(s)}));
    to_sample = e.add("Div_samples" + t, "Div", {to_sample, number("samples" + t, static_cast<double>(s))},
                      f64({regions, Dim(1), Dim(s)}));
    Value* at = e.add("Add_sample" + t, "Add",
                      {e.add("Add_bin" + t, "Add", {start, to_bin}, f64({regions, Dim(bins), Dim(1)})), to_sample},
                      f64(samples));
    auto compare = [&](const std::string& piece, const std::string& op, Value* l, Value* r) {
      return e.add(piece + t, op, {l, r}, Type::tensor(DType::Bool, samples));
    };
    Value* last = number("last" + t, static_cast<double>(size - 1));
    Value* inside =
        e.add("And_inside" + t, "And",
              {compare("GreaterOrEqual_inside", "GreaterOrEqual", at, number("before" + t, -1)),
               compare("LessOrEqual_inside", "LessOrEqual", at, number("after" + t, static_cast<double>(size)))},
              Type::tensor(DType::Bool, samples));
    Value* clamped = e.add("Max_clamp" + t, "Max", {at, number("zero" + t, 0)}, f64(samples));
    Value* low = e.add("Floor" + t, "Floor", {clamped}, f64(samples));
    Value* frac = e.add("Where_frac" + t, "Where",
                        {compare("GreaterOrEqual_edge", "GreaterOrEqual", low, last), number("flat" + t, 0),
                         e.add("Sub_frac" + t, "Sub", {clamped, low}, f64(samples))},
                        f64(samples));
    const Dims one_tap = {regions, Dim(bins), Dim(s), Dim(1)};
    Value* index = e.add(
        "Min_index" + t, "Min",
        {e.add("Add_tap" + t, "Add",
               {e.reshape("Reshape_low" + t, low, one_tap), e.numbers("tap_offsets" + t, {0, 1}, {2}, DType::F64)},
               f64(taps)),
         last},
        f64(taps));
    // The weights 1 - frac and frac: 1 + frac * -1 and 0 + frac * 1.
    Value* weight = e.add(
        "Add_weight" + t, "Add",
        {e.numbers("weight_base" + t, {1, 0}, {2}, DType::F64),
         e.add("Mul_weight" + t, "Mul",
               {e.reshape("Reshape_frac" + t, frac, one_tap), e.numbers("weight_slope" + t, {-1, 1}, {2}, DType::F64)},
               f64(taps))},
        f64(taps));
    Value* keep = e.reshape("Reshape_inside" + t, inside, one_tap);
    Value* zero = number("outside" + t, 0);
    return AxisTaps{e.add("Where_index" + t, "Where", {keep, index, zero}, f64(taps)),
                    e.add("Where_weight" + t, "Where", {keep, weight, zero}, f64(taps))};
  };
  AxisTaps ty = axis_taps("_y", 1, a.height, h), tx = axis_taps("_x", 0, a.width, w);

  const Dim oh(a.height), ow(a.width), sy(2 * s), sx(2 * s);
  const Dims rows = {regions, Dim(1), oh, Dim(1), sy, Dim(1)}, cols = {regions, Dim(1), Dim(1), ow, Dim(1), sx};
  const Dims planar = {regions, Dim(1), oh, ow, sy, sx}, full = {regions, Dim(channels), oh, ow, sy, sx};
  Value* row_at = e.add("Mul_row", "Mul",
                        {e.reshape("Reshape_row", ty.index, rows), number("width", static_cast<double>(w))}, f64(rows));
  Value* pixel =
      e.cast("Cast_pixel", e.add("Add_pixel", "Add", {row_at, e.reshape("Reshape_col", tx.index, cols)}, f64(planar)),
             DType::I64);
  auto i64_type = [](const Dims& d) { return Type::tensor(DType::I64, d); };
  const Dims per_region = {regions, Dim(1), Dim(1), Dim(1), Dim(1), Dim(1)};
  Value* image = e.add("Mul_image", "Mul",
                       {e.reshape("Reshape_batch", e.cast("Cast_batch", n.input(2), DType::I64), per_region),
                        e.i64("image_size", channels * h * w)},
                       i64_type(per_region));
  const Dims per_channel = {Dim(1), Dim(channels), Dim(1), Dim(1), Dim(1), Dim(1)};
  Value* plane = e.add("Mul_plane", "Mul",
                       {e.reshape("Reshape_channel", e.range("Range_channel", 0, Dim(channels)), per_channel),
                        e.i64("plane_size", h * w)},
                       i64_type(per_channel));
  Value* base =
      e.add("Add_base", "Add", {image, plane}, i64_type({regions, Dim(channels), Dim(1), Dim(1), Dim(1), Dim(1)}));
  Value* index = e.add("Add_index", "Add", {base, pixel}, i64_type(full));
  Value* flat = e.reshape("Reshape_x", n.input(0), {dims_product(xd)});
  Value* read =
      e.add("Gather", "Gather", {flat, index}, Type::tensor(x->dtype(), full), {{"axis", Attribute::of_int(0)}});
  Value* weight = e.add(
      "Mul_weights", "Mul",
      {e.reshape("Reshape_weight_y", ty.weight, rows), e.reshape("Reshape_weight_x", tx.weight, cols)}, f64(planar));
  Value* taps =
      e.add("Mul_taps", "Mul", {read, e.cast("Cast_weights", weight, x->dtype())}, Type::tensor(x->dtype(), full));
  const Type reduced = Expansion::kept_type(Type::tensor(x->dtype(), full), {4, 5});
  if (a.max) {
    e.finish_reshape("Reshape_y", e.reduce("ReduceMax", "ReduceMax", taps, {4, 5}, reduced));
    return true;
  }
  Value* sum = e.reshape("Reshape_y", e.reduce("ReduceSum", "ReduceSum", taps, {4, 5}, reduced), y.shape());
  e.finish("Div_count", "Div", {sum, e.scalar("count", static_cast<double>(s * s), x->dtype())});
  return true;
}

// MaxRoiPool -> two masked max reductions, over x then over y, of X's image
// at each region's batch index (a Gather of X along its batch): per axis, in
// f64, the region's corners scaled and rounded half away from zero (Floor of
// the magnitude, plus 1 where the fraction is at least a half, signed again)
// give each bin's span [floor(i bin), ceil((i + 1) bin)) from the start,
// clipped to the image, and a mask [R, bins, size] of the pixels in it; a
// masked-out pixel reads -inf. A bin whose span is empty along either axis
// is 0. Needs C, H and W static. Unlike the reference kernel, it does not
// check the batch indices or refuse NaN coordinates.
bool decompose_max_roi_pool(Expansion& e) {
  const Node& n = e.node();
  const Type* x = region_image(e);
  if (x == nullptr) return false;
  const Type& y = n.output(0)->type();
  const Dims& xd = x->shape();
  if (!xd[1].is_static() || !xd[2].is_static() || !xd[3].is_static()) return false;
  const std::vector<int64_t> pooled = pooled_shape(n);
  const int64_t channels = xd[1].value(), h = xd[2].value(), w = xd[3].value();
  const Dim regions = y.shape()[0];
  auto f64 = [](const Dims& d) { return Type::tensor(DType::F64, d); };
  auto bools = [](const Dims& d) { return Type::tensor(DType::Bool, d); };
  auto number = [&](const std::string& hint, double v) { return e.scalar(hint, v, DType::F64); };
  Value* r = e.cast("Cast_rois", n.input(1), DType::F64);
  auto columns = [&](const std::string& piece, int64_t from, int64_t to) {
    return e.add(piece, "Slice",
                 {r, e.i64("starts_" + piece, from), e.i64("ends_" + piece, to), e.i64("axes_" + piece, 1)},
                 f64({regions, Dim(to - from)}));
  };
  Value* batch = e.cast("Cast_batch", e.reshape("Reshape_batch", columns("Slice_batch", 0, 1), {regions}), DType::I64);
  Value* image =
      e.add("Gather", "Gather", {n.input(0), batch}, Type::tensor(x->dtype(), {regions, Dim(channels), Dim(h), Dim(w)}),
            {{"axis", Attribute::of_int(0)}});
  const Dims corner_dims = {regions, Dim(4)};
  Value* scaled =
      e.add("Mul_scale", "Mul", {columns("Slice_corners", 1, 5), number("scale", n.get_float("spatial_scale", 1.0f))},
            f64(corner_dims));
  Value* magnitude = e.add("Abs", "Abs", {scaled}, f64(corner_dims));
  Value* whole = e.add("Floor", "Floor", {magnitude}, f64(corner_dims));
  Value* up = e.add("GreaterOrEqual_half", "GreaterOrEqual",
                    {e.add("Sub_fraction", "Sub", {magnitude, whole}, f64(corner_dims)), number("half", 0.5)},
                    bools(corner_dims));
  Value* rounded = e.add("Mul_sign", "Mul",
                         {e.add("Sign", "Sign", {scaled}, f64(corner_dims)),
                          e.add("Add_up", "Add", {whole, e.cast("Cast_up", up, DType::F64)}, f64(corner_dims))},
                         f64(corner_dims));

  // Per axis: the mask [R, bins, size] of each bin's pixels and whether the bin is empty [R, bins, 1].
  struct AxisSpans {
    Value* mask;
    Value* empty;
  };
  auto spans = [&](const std::string& t, int64_t first, int64_t bins, int64_t size) {
    const Dims column = {regions, Dim(1)}, per_bin = {regions, Dim(bins)}, edge = {regions, Dim(bins), Dim(1)};
    auto corner = [&](const std::string& c, int64_t col) {
      return e.add("Slice_" + c + t, "Slice",
                   {rounded, e.i64("starts_" + c + t, col), e.i64("ends_" + c + t, col + 1), e.i64("axes_" + c + t, 1)},
                   f64(column));
    };
    Value* start = corner("start", first);
    Value* extent =
        e.add("Add_extent" + t, "Add",
              {e.add("Sub_extent" + t, "Sub", {corner("end", first + 2), start}, f64(column)), number("one" + t, 1)},
              f64(column));
    Value* bin = e.add("Div_bin" + t, "Div",
                       {e.add("Max_extent" + t, "Max", {extent, number("least" + t, 1)}, f64(column)),
                        number("bins" + t, static_cast<double>(bins))},
                       f64(column));
    std::vector<double> firsts, lasts, pixels;
    for (int64_t i = 0; i < bins; ++i) firsts.push_back(static_cast<double>(i));
    for (int64_t i = 0; i < bins; ++i) lasts.push_back(static_cast<double>(i + 1));
    for (int64_t i = 0; i < size; ++i) pixels.push_back(static_cast<double>(i));
    Value* zero = number("zero" + t, 0);
    Value* limit = number("size" + t, static_cast<double>(size));
    auto bound = [&](const std::string& b, const std::string& round, const std::vector<double>& at) {
      Value* v = e.add("Mul_" + b + t, "Mul", {bin, e.numbers(b + t, at, {1, bins}, DType::F64)}, f64(per_bin));
      v = e.add("Add_" + b + t, "Add", {e.add(round + "_" + b + t, round, {v}, f64(per_bin)), start}, f64(per_bin));
      return e.reshape("Reshape_" + b + t, e.add("Clip_" + b + t, "Clip", {v, zero, limit}, f64(per_bin)), edge);
    };
    Value* lo = bound("from", "Floor", firsts);
    Value* hi = bound("to", "Ceil", lasts);
    Value* at = e.numbers("pixels" + t, pixels, {1, 1, size}, DType::F64);
    const Dims grid = {regions, Dim(bins), Dim(size)};
    Value* mask = e.add("And_span" + t, "And",
                        {e.add("GreaterOrEqual_from" + t, "GreaterOrEqual", {at, lo}, bools(grid)),
                         e.add("Less_to" + t, "Less", {at, hi}, bools(grid))},
                        bools(grid));
    return AxisSpans{mask, e.add("LessOrEqual_empty" + t, "LessOrEqual", {hi, lo}, bools(edge))};
  };
  const int64_t ph = pooled[0], pw = pooled[1];
  AxisSpans sy = spans("_y", 1, ph, h), sx = spans("_x", 0, pw, w);
  Value* none = e.scalar("none", -std::numeric_limits<double>::infinity(), x->dtype());
  auto masked_max = [&](const std::string& t, Value* v, Value* mask, const Dims& dims, int64_t axis) {
    Type type = Type::tensor(x->dtype(), dims);
    Value* m = e.add("Where" + t, "Where", {mask, v, none}, type);
    return e.reduce("ReduceMax" + t, "ReduceMax", m, {axis}, Expansion::kept_type(type, {axis}));
  };
  const Dim c(channels);
  Value* along_x = masked_max("_x", e.reshape("Reshape_image", image, {regions, c, Dim(h), Dim(1), Dim(w)}),
                              e.reshape("Reshape_mask_x", sx.mask, {regions, Dim(1), Dim(1), Dim(pw), Dim(w)}),
                              {regions, c, Dim(h), Dim(pw), Dim(w)}, 4);
  Value* along_y = masked_max("_y", e.reshape("Reshape_rows", along_x, {regions, c, Dim(1), Dim(h), Dim(pw)}),
                              e.reshape("Reshape_mask_y", sy.mask, {regions, Dim(1), Dim(ph), Dim(h), Dim(1)}),
                              {regions, c, Dim(ph), Dim(h), Dim(pw)}, 3);
  Value* empty = e.add("Or_empty", "Or",
                       {e.reshape("Reshape_empty_y", sy.empty, {regions, Dim(1), Dim(ph), Dim(1)}),
                        e.reshape("Reshape_empty_x", sx.empty, {regions, Dim(1), Dim(1), Dim(pw)})},
                       bools({regions, Dim(1), Dim(ph), Dim(pw)}));
  e.finish("Where_empty", "Where",
           {empty, e.scalar("empty", 0, x->dtype()), e.reshape("Reshape_pooled", along_y, y.shape())});
  return true;
}

// NonMaxSuppression -> tcc::NmsSelect, the kernel that selects each (batch,
// class)'s boxes in place order and counts them (codegen/nms_template.h),
// then the one host step of the NonZero that compacts the selection (which
// binds its count): place p of (batch, class) is occupied below the count,
// so NonZero lists (batch, class, place) in the reference's order and a
// GatherND of the box at each place completes the triple. Any box count,
// static or symbolic; the optional scalars of one element (or empty, as
// absent), read on the device.
bool decompose_nms(Expansion& e) {
  const Node& n = e.node();
  const Type& boxes = n.input(0)->type();
  const Type& scores = n.input(1)->type();
  const Type& y = n.output(0)->type();
  if (!boxes.is_tensor() || !boxes.has_rank() || boxes.rank() != 3 || boxes.dtype() != DType::F32 ||
      !scores.is_tensor() || !scores.has_rank() || scores.rank() != 3 || scores.dtype() != DType::F32 ||
      !y.is_tensor() || !y.has_rank() || !e.data_dependent(y.shape()[0]))
    return false;
  const Dim batch = scores.shape()[0], classes = scores.shape()[1], count = scores.shape()[2];
  // The optional scalars as 0-D tensors; null when absent or empty.
  std::vector<Value*> ins = {n.input(0), n.input(1)};
  for (size_t i = 2; i < 5 && i < n.num_inputs(); ++i) {
    ins.push_back(nullptr);
    if (!n.has_input(i)) continue;
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.fully_static()) return false;
    Dim size = dims_product(t.shape());
    if (size == Dim(0)) continue;
    if (size != Dim(1)) return false;
    ins.back() = t.rank() == 0 ? n.input(i) : e.reshape("Reshape_scalar" + std::to_string(i), n.input(i), {});
  }
  while (ins.back() == nullptr) ins.pop_back();
  const Dims per_class = {batch, classes, count};
  auto i64 = [](Dims d) { return Type::tensor(DType::I64, std::move(d)); };
  std::vector<Value*> selection = e.add_outputs(
      "NmsSelect", "NmsSelect", ins, {i64(per_class), i64({batch, classes})},
      {{"center_point_box", Attribute::of_int(n.get_int("center_point_box", 0))}}, std::string(kTccDomain));
  Value* place = e.reshape("Reshape_place", e.range("Range", 0, count), {Dim(1), Dim(1), count});
  Value* found_here = e.reshape("Reshape_count", selection[1], {batch, classes, Dim(1)});
  Value* occupied = e.add("Less_occupied", "Less", {place, found_here}, Type::tensor(DType::Bool, per_class));
  const Dim found = y.shape()[0];
  Value* positions = e.add("NonZero", "NonZero", {occupied}, i64({Dim(3), found}));
  Value* triples = e.add("Transpose", "Transpose", {positions}, i64({found, Dim(3)}),
                         {{"perm", Attribute::of_ints({1, 0})}});
  Value* picked = e.add("GatherND", "GatherND", {selection[0], triples}, i64({found}));
  Value* pairs = e.add("Slice_pairs", "Slice",
                       {triples, e.i64("pair_starts", 0), e.i64("pair_ends", 2), e.i64("pair_axes", 1)},
                       i64({found, Dim(2)}));
  e.finish("Concat", "Concat", {pairs, e.reshape("Reshape_picked", picked, {found, Dim(1)})},
           {{"axis", Attribute::of_int(1)}});
  return true;
}

}  // namespace

void register_detection_ops(OpRegistry& r) {
  const std::vector<DType> float_types = {DType::F32, DType::F16, DType::BF16, DType::F64};
  std::vector<DType> with_indices = float_types;
  with_indices.push_back(DType::I64);
  r.add(OpDef{"", "RoiAlign", 10, kReduction, infer_roi_align, eval_roi_align, with_indices})
      .decomposition(decompose_roi_align)
      .trains_through_decomposition();
  r.add(OpDef{"", "MaxRoiPool", 1, kReduction, infer_max_roi_pool, eval_max_roi_pool, float_types})
      .decomposition(decompose_max_roi_pool)
      .trains_through_decomposition();
  r.add(OpDef{"", "NonMaxSuppression", 10, kDataDependentShape, infer_nms, eval_nms, {DType::F32, DType::I64}})
      .decomposition(decompose_nms);
  r.add(OpDef{std::string(kTccDomain), "NmsSelect", 1, 0, infer_nms_select, eval_nms_select,
              {DType::F32, DType::I64}})
      .kernel_role(KernelRole::Nms);
  r.add(OpDef{std::string(kTccDomain), "RoiAlign", 1, kReduction, infer_roi_align, eval_roi_align,
              {DType::F32, DType::F64, DType::I64}})
      .kernel_role(KernelRole::RoiAlign);
}

}  // namespace tcc
