#include "frontends/pt2/torch_pickle.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace tcc {

namespace {

// torch.save's storage classes (torch/storage.py's legacy typed storages).
const std::map<std::string, DType>& storage_classes() {
  static const std::map<std::string, DType> classes = {
      {"torch.FloatStorage", DType::F32}, {"torch.DoubleStorage", DType::F64}, {"torch.HalfStorage", DType::F16},
      {"torch.BFloat16Storage", DType::BF16}, {"torch.LongStorage", DType::I64}, {"torch.IntStorage", DType::I32},
      {"torch.ShortStorage", DType::I16}, {"torch.CharStorage", DType::I8}, {"torch.ByteStorage", DType::U8},
      {"torch.BoolStorage", DType::Bool}};
  return classes;
}

constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";
// Nesting of tuples torch.save writes (a rebuild call's arguments) is 3.
constexpr int kMaxDepth = 16;
constexpr int64_t kMaxElements = int64_t{1} << 50;

struct Obj;
using Ref = std::shared_ptr<Obj>;

// A value of the machine. Dicts hold tensors only, so no value can reach
// itself: tuples hold values made before them.
struct Obj {
  enum class Kind { Bool, Int, String, Tuple, Dict, Global, Storage, Tensor };
  Kind kind;
  int64_t i = 0;                    // Bool, Int
  std::string s;                    // String; Global: "module.name"
  std::vector<Ref> items;           // Tuple
  std::map<std::string, Ref> dict;  // Dict
  PickledTensor tensor;             // Storage: storage, storage_numel, view.dtype; Tensor: all
  int depth = 1;                    // of nested tuples
};

const char* kind_name(Obj::Kind k) {
  switch (k) {
    case Obj::Kind::Bool: return "bool";
    case Obj::Kind::Int: return "int";
    case Obj::Kind::String: return "str";
    case Obj::Kind::Tuple: return "tuple";
    case Obj::Kind::Dict: return "dict";
    case Obj::Kind::Global: return "global";
    case Obj::Kind::Storage: return "storage";
    case Obj::Kind::Tensor: return "tensor";
  }
  return "?";
}

Ref make(Obj::Kind k) {
  auto o = std::make_shared<Obj>();
  o->kind = k;
  return o;
}

// The protocol-2 opcodes torch.save writes for a dict of tensors; nullptr for
// any other byte.
const char* opcode_name(unsigned char code) {
  switch (code) {
    case 0x80: return "PROTO";
    case '}': return "EMPTY_DICT";
    case ')': return "EMPTY_TUPLE";
    case '(': return "MARK";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'X': return "BINUNICODE";
    case 'c': return "GLOBAL";
    case 'Q': return "BINPERSID";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 'J': return "BININT";
    case 0x8a: return "LONG1";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'R': return "REDUCE";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case '.': return "STOP";
    default: return nullptr;
  }
}

// Printable and short: a name from the pickle in a diagnostic.
std::string quoted(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return "'" + out + (s.size() > 80 ? "...'" : "'");
}

bool plain_key(const std::string& k) {
  return !k.empty() && k.size() <= 64 &&
         std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

class Unpickler {
 public:
  Unpickler(const Pt2Archive& a, std::string entry) : a_(a), entry_(std::move(entry)), in_(a.read(entry_)) {}

  std::map<std::string, PickledTensor> run() {
    while (true) {
      if (pos_ >= in_.size())
        a_.fail(entry_, "the pickle ends at byte " + std::to_string(pos_) + " without STOP (truncated?)");
      op_ = pos_;
      unsigned char code = static_cast<unsigned char>(in_[pos_++]);
      const char* name = opcode_name(code);
      if (!name) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", code);
        fail(std::string("opcode ") + hex + " is not one torch.save writes for a dict of tensors");
      }
      name_ = name;
      switch (code) {
        case 0x80: {
          int proto = static_cast<int>(le(1));
          if (proto != 2) fail("pickle protocol " + std::to_string(proto) + "; torch.save writes protocol 2");
          break;
        }
        case '}': push(make(Obj::Kind::Dict)); break;
        case ')': push(make(Obj::Kind::Tuple)); break;
        case '(': marks_.push_back(stack_.size()); break;
        case 't': push(tuple(pop_mark())); break;
        case 0x85: case 0x86: case 0x87: {
          size_t n = code - 0x84;
          need(n);
          std::vector<Ref> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(tuple(std::move(items)));
          break;
        }
        case 'q': put(le(1)); break;
        case 'r': put(le(4)); break;
        case 'h': get(le(1)); break;
        case 'j': get(le(4)); break;
        case 'X': {
          Ref str = make(Obj::Kind::String);
          str->s = take(le(4));
          push(str);
          break;
        }
        case 'c': global(); break;
        case 'Q': push(storage(pop())); break;
        case 'K': push(integer(static_cast<int64_t>(le(1)))); break;
        case 'M': push(integer(static_cast<int64_t>(le(2)))); break;
        case 'J': push(integer(static_cast<int32_t>(le(4)))); break;
        case 0x8a: {  // n bytes, little-endian two's complement
          size_t n = le(1);
          if (n > 8) fail("LONG1 of " + std::to_string(n) + " bytes; tcc reads integers of up to 8");
          uint64_t v = le(n);
          if (n > 0 && n < 8 && ((v >> (8 * n - 1)) & 1)) v |= ~uint64_t{0} << (8 * n);
          push(integer(static_cast<int64_t>(v)));
          break;
        }
        case 0x88: case 0x89: {
          Ref b = make(Obj::Kind::Bool);
          b->i = code == 0x88;
          push(b);
          break;
        }
        case 'R': reduce(); break;
        case 's': {
          need(3);
          Ref value = pop(), key = pop();
          set_item(top_dict(), key, value);
          break;
        }
        case 'u': {
          std::vector<Ref> items = pop_mark();
          if (items.size() % 2) fail("SETITEMS of an odd number of values (" + std::to_string(items.size()) + ")");
          Obj& d = top_dict();
          for (size_t k = 0; k < items.size(); k += 2) set_item(d, items[k], items[k + 1]);
          break;
        }
        case '.': return result();
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    a_.fail(entry_, "at byte " + std::to_string(op_) + ": " + msg);
  }

  // The next n bytes as a little-endian unsigned integer.
  uint64_t le(size_t n) {
    std::string b = take(n);
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = v << 8 | static_cast<unsigned char>(b[k]);
    return v;
  }

  std::string take(uint64_t n) {
    if (n > in_.size() - pos_)
      a_.fail(entry_, "the pickle ends inside its " + name_ + " at byte " + std::to_string(op_) + " (truncated?)");
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  // A "\n"-terminated line of GLOBAL's operand.
  std::string line() {
    size_t e = in_.find('\n', pos_);
    if (e == std::string::npos || e - pos_ > 256)
      a_.fail(entry_, "the pickle ends inside its GLOBAL at byte " + std::to_string(op_) + " (truncated?)");
    std::string s = in_.substr(pos_, e - pos_);
    pos_ = e + 1;
    return s;
  }

  void push(Ref r) { stack_.push_back(std::move(r)); }

  void need(size_t n) const {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() - floor < n)
      fail(name_ + " needs " + std::to_string(n) + " values on the stack, it holds " +
           std::to_string(stack_.size() - floor));
  }

  Ref pop() {
    need(1);
    Ref r = std::move(stack_.back());
    stack_.pop_back();
    return r;
  }

  std::vector<Ref> pop_mark() {
    if (marks_.empty()) fail(name_ + " with no MARK before it");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  Ref tuple(std::vector<Ref> items) {
    Ref t = make(Obj::Kind::Tuple);
    for (const Ref& r : items) t->depth = std::max(t->depth, r->depth + 1);
    if (t->depth > kMaxDepth) fail("tuples nested " + std::to_string(t->depth) + " deep; torch.save writes at most 3");
    t->items = std::move(items);
    return t;
  }

  Ref integer(int64_t v) {
    Ref r = make(Obj::Kind::Int);
    r->i = v;
    return r;
  }

  void put(uint64_t slot) {
    need(1);
    memo_[slot] = stack_.back();
  }

  void get(uint64_t slot) {
    auto it = memo_.find(slot);
    if (it == memo_.end()) fail(name_ + " of memo slot " + std::to_string(slot) + ", which nothing stored");
    push(it->second);
  }

  void global() {
    std::string module = line();
    std::string name = line();
    std::string full = module + "." + name;
    if (full != kOrderedDict && full != kRebuildTensor && full != kRebuildParameter && !storage_classes().count(full))
      fail("the global " + quoted(full) + " is not one torch.save writes for a dict of tensors (" + kOrderedDict +
           ", " + kRebuildTensor + ", " + kRebuildParameter + " or a torch.<Dtype>Storage)");
    Ref g = make(Obj::Kind::Global);
    g->s = full;
    push(g);
  }

  const Obj& expect(const Ref& r, Obj::Kind k, const std::string& what) const {
    if (r->kind != k) fail(what + " is a " + kind_name(r->kind) + ", expected a " + kind_name(k));
    return *r;
  }

  int64_t non_negative(const Ref& r, const std::string& what) const {
    int64_t v = expect(r, Obj::Kind::Int, what).i;
    if (v < 0 || v > kMaxElements) fail(what + " is " + std::to_string(v) + ", outside [0, 2^50]");
    return v;
  }

  std::vector<int64_t> ints(const Ref& r, const std::string& what) const {
    std::vector<int64_t> out;
    for (const Ref& e : expect(r, Obj::Kind::Tuple, what).items) out.push_back(non_negative(e, what + "'s element"));
    return out;
  }

  // ('storage', torch.<Dtype>Storage, key, location, numel): data/<key>.
  Ref storage(const Ref& pid) {
    const Obj& t = expect(pid, Obj::Kind::Tuple, "the persistent id");
    if (t.items.size() != 5)
      fail("the persistent id has " + std::to_string(t.items.size()) +
           " items; torch.save writes ('storage', type, key, location, numel)");
    if (expect(t.items[0], Obj::Kind::String, "the persistent id's tag").s != "storage")
      fail("the persistent id's tag is " + quoted(t.items[0]->s) + ", expected 'storage'");
    const std::string& type = expect(t.items[1], Obj::Kind::Global, "the storage's type").s;
    auto dt = storage_classes().find(type);
    if (dt == storage_classes().end()) fail("the storage's type is " + quoted(type) + ", not a torch.<Dtype>Storage");
    const std::string& key = expect(t.items[2], Obj::Kind::String, "the storage's key").s;
    if (!plain_key(key)) fail("the storage key " + quoted(key) + " is not a plain name (torch.save writes a number)");
    expect(t.items[3], Obj::Kind::String, "the storage's location");
    Ref s = make(Obj::Kind::Storage);
    s->tensor.storage = key;
    s->tensor.view.dtype = dt->second;
    s->tensor.storage_numel = non_negative(t.items[4], "the storage's size");
    return s;
  }

  void reduce() {
    need(2);
    Ref args = pop(), fn = pop();
    const std::string& f = expect(fn, Obj::Kind::Global, "REDUCE's callable").s;
    const std::vector<Ref>& a = expect(args, Obj::Kind::Tuple, "REDUCE's arguments").items;
    auto arity = [&](size_t n) {
      if (a.size() != n)
        fail(f + " called with " + std::to_string(a.size()) + " arguments; torch.save passes " + std::to_string(n));
    };
    auto no_hooks = [&](const Ref& r) {
      if (!expect(r, Obj::Kind::Dict, f + "'s backward hooks").dict.empty()) fail(f + "'s backward hooks are not empty");
    };
    if (f == kOrderedDict) {
      arity(0);
      push(make(Obj::Kind::Dict));
    } else if (f == kRebuildTensor) {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks)
      arity(6);
      Ref t = make(Obj::Kind::Tensor);
      t->tensor = expect(a[0], Obj::Kind::Storage, "the tensor's storage").tensor;
      t->tensor.view.offset = non_negative(a[1], "the tensor's storage offset");
      t->tensor.view.sizes = ints(a[2], "the tensor's size");
      t->tensor.view.strides = ints(a[3], "the tensor's stride");
      if (t->tensor.view.sizes.size() != t->tensor.view.strides.size())
        fail("the tensor has " + std::to_string(t->tensor.view.sizes.size()) + " sizes and " +
             std::to_string(t->tensor.view.strides.size()) + " strides");
      expect(a[4], Obj::Kind::Bool, "the tensor's requires_grad");
      no_hooks(a[5]);
      push(t);
    } else if (f == kRebuildParameter) {
      // (data, requires_grad, backward_hooks)
      arity(3);
      expect(a[0], Obj::Kind::Tensor, "the parameter's data");
      expect(a[1], Obj::Kind::Bool, "the parameter's requires_grad");
      no_hooks(a[2]);
      push(a[0]);
    } else {
      fail("REDUCE calls " + f + ", which torch.save names only as a storage's type");
    }
  }

  Obj& top_dict() {
    need(1);
    expect(stack_.back(), Obj::Kind::Dict, name_ + "'s target");
    return *stack_.back();
  }

  void set_item(Obj& d, const Ref& key, const Ref& value) {
    const std::string& k = expect(key, Obj::Kind::String, "a key of the dict").s;
    expect(value, Obj::Kind::Tensor, "the dict's value for " + quoted(k));
    d.dict[k] = value;
  }

  std::map<std::string, PickledTensor> result() {
    Ref top = pop();
    const Obj& d = expect(top, Obj::Kind::Dict, "the pickled value");
    std::map<std::string, PickledTensor> out;
    for (const auto& [k, v] : d.dict) out.emplace(k, v->tensor);
    return out;
  }

  const Pt2Archive& a_;
  std::string entry_;
  std::string in_;
  size_t pos_ = 0, op_ = 0;
  std::string name_;  // the opcode being read, for diagnostics
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, Ref> memo_;
};

}  // namespace

std::map<std::string, PickledTensor> unpickle_tensor_dict(const Pt2Archive& a, const std::string& entry) {
  return Unpickler(a, entry).run();
}

TorchSavedDict::TorchSavedDict(const Pt2Archive& outer, const std::string& entry, Pt2Limits limits)
    : archive_(std::make_unique<Pt2Archive>(outer.read(entry), outer.file() + "/" + outer.root() + entry, limits)),
      storages_(std::make_unique<StorageReader>(*archive_)) {
  if (!archive_->has("data.pkl")) archive_->fail("data.pkl", "is missing: not a torch.save file");
  if (archive_->has("byteorder") && archive_->read("byteorder") != "little")
    archive_->fail("byteorder", "is not 'little'; tcc reads little-endian storages only");
  tensors_ = unpickle_tensor_dict(*archive_, "data.pkl");
}

Tensor TorchSavedDict::tensor(const std::string& name) {
  const PickledTensor& t = tensors_.at(name);
  std::string entry = "data/" + t.storage;
  uint64_t declared = static_cast<uint64_t>(t.storage_numel) * dtype_size(t.view.dtype);
  if (archive_->size(entry) != declared)
    archive_->fail(entry, "holds " + std::to_string(archive_->size(entry)) + " bytes, but the pickle declares " +
                              std::to_string(t.storage_numel) + " " + std::string(dtype_name(t.view.dtype)) +
                              " elements (" + std::to_string(declared) + " bytes) for tensor '" + name + "'");
  return storages_->view(entry, t.view, "tensor '" + name + "'", false);
}

}  // namespace tcc
