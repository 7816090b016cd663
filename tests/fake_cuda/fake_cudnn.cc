// The fake cuDNN (see fake_cudnn.h).
#include "tests/fake_cuda/fake_cudnn.h"

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/fake_cuda/fake_cuda.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

namespace {

using Desc = cudnnBackendDescriptor_t;

struct Attribute {
  cudnnBackendAttributeType_t type;
  std::vector<unsigned char> bytes;
  int64_t count;
};

// An engine config of the heuristics' list.
struct Engine {
  bool tensor_core;
  int64_t workspace;
  bool runtime_compiled;
};
const Engine kEngines[] = {{true, 0, false}, {false, 64 << 20, false}, {false, 0, false}, {false, 0, true}};

struct Descriptor {
  cudnnBackendDescriptorType_t type;
  std::map<cudnnBackendAttributeName_t, Attribute> attrs;
  bool finalized = false;
  // An engine config's or engine's place in kEngines and its operation graph.
  int engine = -1;
  Descriptor* graph = nullptr;
};

struct State {
  std::mutex mu;
  // A descriptor lives while created and while a captured execution holds it.
  std::map<Descriptor*, std::shared_ptr<Descriptor>> live;
  tcc::fake_cudnn::Counts counts;
  bool fuses = false;
  int last_engine = -1;
};
State& state() {
  static State s;
  return s;
}

size_t element_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT: return sizeof(float);
    case CUDNN_TYPE_DOUBLE: return sizeof(double);
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void*);
    default: return sizeof(int32_t);  // the enums
  }
}

Descriptor* as(Desc d) { return static_cast<Descriptor*>(d); }

bool known(Desc d) {
  std::lock_guard<std::mutex> lock(state().mu);
  return d && state().live.count(as(d));
}

const Attribute* find(const Descriptor& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type) {
  auto it = d.attrs.find(name);
  if (it == d.attrs.end() || it->second.type != type) return nullptr;
  return &it->second;
}

template <typename T>
std::vector<T> values(const Descriptor& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type) {
  const Attribute* a = find(d, name, type);
  if (!a) return {};
  std::vector<T> out(static_cast<size_t>(a->count));
  std::memcpy(out.data(), a->bytes.data(), a->bytes.size());
  return out;
}

template <typename T>
T value(const Descriptor& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type) {
  std::vector<T> v = values<T>(d, name, type);
  return v.size() == 1 ? v[0] : T{};
}

bool is_virtual(const Descriptor& tensor) {
  const Attribute* a = find(tensor, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN);
  return a && a->count == 1 && a->bytes[0] != 0;
}

Descriptor* ref(const Descriptor& d, cudnnBackendAttributeName_t name) {
  return as(value<Desc>(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR));
}

bool finalized_ref(const Descriptor& d, cudnnBackendAttributeName_t name, cudnnBackendDescriptorType_t type) {
  Descriptor* r = ref(d, name);
  return r && known(r) && r->finalized && r->type == type;
}

std::vector<int64_t> dims(const Descriptor& tensor) {
  return values<int64_t>(tensor, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64);
}

// The checks cudnnBackendFinalize makes of each kind of descriptor.
bool complete(const Descriptor& d) {
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      size_t rank = dims(d).size();
      return rank >= 3 && values<int64_t>(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64).size() == rank &&
             find(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE) &&
             find(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64) &&
             find(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64);
    }
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
      size_t n = static_cast<size_t>(value<int64_t>(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64));
      for (auto name : {CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
                        CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_ATTR_CONVOLUTION_DILATIONS})
        if (n == 0 || values<int64_t>(d, name, CUDNN_TYPE_INT64).size() != n) return false;
      return find(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE) &&
             find(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE);
    }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: {
      for (auto name : {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y})
        if (!finalized_ref(d, name, CUDNN_BACKEND_TENSOR_DESCRIPTOR)) return false;
      if (!finalized_ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR))
        return false;
      const Descriptor& conv = *ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC);
      std::vector<int64_t> x = dims(*ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X));
      std::vector<int64_t> w = dims(*ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W));
      std::vector<int64_t> y = dims(*ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y));
      std::vector<int64_t> pre = values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64);
      std::vector<int64_t> post = values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64);
      std::vector<int64_t> stride = values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64);
      std::vector<int64_t> dil = values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64);
      if (x.size() != w.size() || x.size() != y.size() || x.size() != pre.size() + 2) return false;
      if (y[0] != x[0] || y[1] != w[0] || x[1] % w[1] != 0 || w[0] % (x[1] / w[1]) != 0) return false;
      for (size_t i = 0; i < pre.size(); ++i)
        if (y[i + 2] != (x[i + 2] + pre[i] + post[i] - dil[i] * (w[i + 2] - 1) - 1) / stride[i] + 1) return false;
      return find(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT) ||
             find(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_DOUBLE);
    }
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
      return find(d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE) &&
             find(d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE);
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
      if (!finalized_ref(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_BACKEND_POINTWISE_DESCRIPTOR) ||
          !finalized_ref(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR) ||
          !finalized_ref(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR))
        return false;
      auto mode = value<cudnnPointwiseMode_t>(*ref(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR),
                                              CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE);
      bool binary = finalized_ref(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
      return mode == CUDNN_POINTWISE_ADD ? binary : mode == CUDNN_POINTWISE_RELU_FWD && !binary;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
      std::vector<Desc> ops = values<Desc>(d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR);
      if (ops.empty() || !find(d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE)) return false;
      return std::all_of(ops.begin(), ops.end(), [](Desc op) { return known(op) && as(op)->finalized; });
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      return finalized_ref(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) &&
             find(d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE);
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
      Descriptor* config = ref(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
      if (!config || !known(config) || config->engine < 0 ||
          !find(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE))
        return false;
      size_t ops = values<Desc>(*config->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR).size();
      return ops == 1 || state().fuses;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
      size_t n = values<int64_t>(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64).size();
      return n > 0 && values<void*>(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR).size() == n &&
             find(d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR);
    }
    default: return false;
  }
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The tensors of the graph being run: a variant pack's pointers and the
// virtual tensors' values, read and written whole.
struct Memory {
  std::map<int64_t, void*> pointers;
  std::map<int64_t, std::vector<double>> virtuals;

  static int64_t uid(const Descriptor& t) { return value<int64_t>(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64); }
  static bool f64(const Descriptor& t) {
    return value<cudnnDataType_t>(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE) == CUDNN_DATA_DOUBLE;
  }

  std::vector<double> read(const Descriptor& t) {
    if (is_virtual(t)) return virtuals.at(uid(t));
    std::vector<double> v(static_cast<size_t>(numel(dims(t))));
    const void* p = pointers.at(uid(t));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = f64(t) ? static_cast<const double*>(p)[i] : static_cast<const float*>(p)[i];
    return v;
  }
  void write(const Descriptor& t, const std::vector<double>& v) {
    if (is_virtual(t)) {
      virtuals[uid(t)] = v;
      return;
    }
    void* p = pointers.at(uid(t));
    for (size_t i = 0; i < v.size(); ++i) {
      if (f64(t)) static_cast<double*>(p)[i] = v[i];
      else static_cast<float*>(p)[i] = static_cast<float>(v[i]);
    }
  }
};

// Decodes flat index i into `idx` over row-major `dims`.
void unflatten(int64_t i, const std::vector<int64_t>& dims, std::vector<int64_t>& idx) {
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = i % dims[k];
    i /= dims[k];
  }
}

void run_conv(const Descriptor& op, Memory& mem) {
  const Descriptor& xt = *ref(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X);
  const Descriptor& wt = *ref(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W);
  const Descriptor& yt = *ref(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y);
  const Descriptor& conv = *ref(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC);
  const std::vector<int64_t> x = dims(xt), w = dims(wt), y = dims(yt);
  const std::vector<int64_t> pad = values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64);
  const std::vector<int64_t> stride =
      values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64);
  const std::vector<int64_t> dil = values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64);
  const std::vector<double> xv = mem.read(xt), wv = mem.read(wt);
  std::vector<double> yv(static_cast<size_t>(numel(y)));
  const int64_t group_out = w[0] / (x[1] / w[1]);
  const std::vector<int64_t> taps(w.begin() + 1, w.end());  // [c / groups, kernel...]
  const int64_t num_taps = numel(taps);
  std::vector<int64_t> o(y.size()), r(taps.size());
  for (int64_t i = 0; i < numel(y); ++i) {
    unflatten(i, y, o);
    double sum = 0;
    for (int64_t t = 0; t < num_taps; ++t) {
      unflatten(t, taps, r);
      int64_t at = o[0] * x[1] + o[1] / group_out * w[1] + r[0];
      bool inside = true;
      for (size_t s = 0; s < pad.size(); ++s) {
        int64_t p = o[s + 2] * stride[s] - pad[s] + r[s + 1] * dil[s];
        inside = inside && p >= 0 && p < x[s + 2];
        at = at * x[s + 2] + p;
      }
      if (inside) sum += xv[static_cast<size_t>(at)] * wv[static_cast<size_t>(o[1] * num_taps + t)];
    }
    yv[static_cast<size_t>(i)] = sum;
  }
  mem.write(yt, yv);
}

void run_pointwise(const Descriptor& op, Memory& mem) {
  const Descriptor& xt = *ref(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC);
  const Descriptor& yt = *ref(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
  const Descriptor* bt = ref(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  const std::vector<int64_t> y = dims(yt);
  const std::vector<int64_t> b = bt ? dims(*bt) : y;
  std::vector<double> v = mem.read(xt);
  const std::vector<double> bv = bt ? mem.read(*bt) : std::vector<double>{};
  std::vector<int64_t> o(y.size());
  for (int64_t i = 0; i < numel(y); ++i) {
    double& e = v[static_cast<size_t>(i)];
    if (bt) {
      unflatten(i, y, o);
      int64_t at = 0;
      for (size_t k = 0; k < y.size(); ++k) at = at * b[k] + (b[k] == 1 ? 0 : o[k]);
      e += bv[static_cast<size_t>(at)];
    } else {
      e = std::max(e, 0.0);
    }
  }
  mem.write(yt, v);
}

}  // namespace

namespace tcc::fake_cudnn {

Counts counts() {
  std::lock_guard<std::mutex> lock(state().mu);
  Counts c = state().counts;
  c.live_descriptors = state().live.size();
  return c;
}

void reset_counts() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().counts = {};
}

void set_fuses_epilogues(bool on) { state().fuses = on; }

int last_engine() { return state().last_engine; }

}  // namespace tcc::fake_cudnn

extern "C" {

const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  return status == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "fake cuDNN error";
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* handle) {
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, Desc* out) {
  auto d = std::make_shared<Descriptor>(Descriptor{type, {}});
  std::lock_guard<std::mutex> lock(state().mu);
  state().live[d.get()] = d;
  *out = d.get();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendDestroyDescriptor(Desc d) {
  if (!known(d)) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lock(state().mu);
  state().live.erase(as(d));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendSetAttribute(Desc d, cudnnBackendAttributeName_t name,
                                                   cudnnBackendAttributeType_t type, int64_t count,
                                                   const void* values) {
  if (!known(d) || as(d)->finalized || count < 0 || (count > 0 && !values)) return CUDNN_STATUS_BAD_PARAM;
  const auto* bytes = static_cast<const unsigned char*>(values);
  as(d)->attrs[name] = {type, {bytes, bytes + count * static_cast<int64_t>(element_size(type))}, count};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendFinalize(Desc d) {
  if (!known(d) || as(d)->finalized) return CUDNN_STATUS_BAD_PARAM;
  if (!complete(*as(d))) return as(d)->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ? CUDNN_STATUS_NOT_SUPPORTED
                                                                                      : CUDNN_STATUS_BAD_PARAM;
  as(d)->finalized = true;
  if (as(d)->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
    const Descriptor& config = *ref(*as(d), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
    as(d)->engine = config.engine;
    as(d)->graph = config.graph;
    std::lock_guard<std::mutex> lock(state().mu);
    ++state().counts.plans;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendGetAttribute(Desc const d, cudnnBackendAttributeName_t name,
                                                   cudnnBackendAttributeType_t type, int64_t requested,
                                                   int64_t* count, void* out) {
  if (!known(d) || !count) return CUDNN_STATUS_BAD_PARAM;
  const Descriptor& self = *as(d);
  const int64_t engines = static_cast<int64_t>(std::size(kEngines));
  if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS && type == CUDNN_TYPE_BACKEND_DESCRIPTOR && self.finalized) {
    *count = std::min(requested == 0 ? engines : requested, engines);
    for (int64_t i = 0; requested > 0 && i < *count; ++i) {
      Descriptor* config = as(static_cast<Desc*>(out)[i]);
      if (!known(config) || config->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
      config->engine = static_cast<int>(i);
      config->graph = ref(self, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (self.engine < 0 || requested < 1 || !out) return CUDNN_STATUS_BAD_PARAM;
  const Engine& e = kEngines[self.engine];
  if (name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 && self.finalized) {
    *static_cast<int64_t*>(out) = e.workspace;
    *count = 1;
  } else if (name == CUDNN_ATTR_ENGINECFG_ENGINE && type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    Descriptor* engine = as(*static_cast<Desc*>(out));
    if (!known(engine) || engine->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
    engine->engine = self.engine;
    engine->graph = self.graph;
    engine->finalized = true;
    *count = 1;
  } else if (name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE && type == CUDNN_TYPE_NUMERICAL_NOTE) {
    *count = e.tensor_core ? 1 : 0;
    if (e.tensor_core) *static_cast<cudnnBackendNumericalNote_t*>(out) = CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
  } else if (name == CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE && type == CUDNN_TYPE_BEHAVIOR_NOTE) {
    *count = e.runtime_compiled ? 1 : 0;
    if (e.runtime_compiled) *static_cast<cudnnBackendBehaviorNote_t*>(out) = CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  } else {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendExecute(cudnnHandle_t handle, Desc plan, Desc pack) {
  if (!handle || !known(plan) || !known(pack) || !as(plan)->finalized || !as(pack)->finalized ||
      as(plan)->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
      as(pack)->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    return CUDNN_STATUS_BAD_PARAM;
  const Descriptor& config = *ref(*as(plan), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  std::map<int64_t, void*> pointers;
  std::vector<int64_t> uids = values<int64_t>(*as(pack), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64);
  std::vector<void*> data = values<void*>(*as(pack), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR);
  for (size_t i = 0; i < uids.size(); ++i) pointers[uids[i]] = data[i];
  // The work holds the graph's descriptors, as a captured graph holds its
  // kernels after the plan is gone.
  std::vector<std::shared_ptr<Descriptor>> held;
  std::vector<const Descriptor*> ops;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    for (Desc op : values<Desc>(*config.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR)) {
      ops.push_back(as(op));
      held.push_back(state().live.at(as(op)));
      for (const auto& [name, attr] : as(op)->attrs)
        if (attr.type == CUDNN_TYPE_BACKEND_DESCRIPTOR) held.push_back(state().live.at(ref(*as(op), name)));
    }
  }
  for (const Descriptor* op : ops)
    for (const auto& [name, attr] : op->attrs) {
      // Every operand a graph names either is virtual or has a pointer in the pack.
      Descriptor* t = attr.type == CUDNN_TYPE_BACKEND_DESCRIPTOR ? ref(*op, name) : nullptr;
      if (t && t->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR && !is_virtual(*t) &&
          !pointers.count(value<int64_t>(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64)))
        return CUDNN_STATUS_BAD_PARAM;
    }
  tcc::fake_cuda::enqueue(handle->stream, "cudnnBackendExecute", [held, ops, pointers] {
    Memory mem;
    mem.pointers = pointers;
    for (const Descriptor* op : ops) {
      if (op->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR) run_conv(*op, mem);
      else run_pointwise(*op, mem);
    }
  });
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().counts.executions;
  state().last_engine = config.engine;
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
