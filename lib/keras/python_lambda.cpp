#include "keras/python_lambda.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace trainer {

std::optional<std::string> base64_decode(const std::string& text) {
  std::string out;
  uint32_t bits = 0;
  int nbits = 0, pad = 0;
  for (char ch : text) {
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=') { ++pad; continue; }
    else return std::nullopt;
    if (pad) return std::nullopt;  // data after padding
    bits = (bits << 6) | uint32_t(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out.push_back(char((bits >> nbits) & 0xff));
    }
  }
  if (pad > 2 || nbits >= 6) return std::nullopt;
  return out;
}

namespace {

/// A Python object as marshal stores it, as far as a function's constants need.
struct PyObject;
using PyRef = std::shared_ptr<const PyObject>;
struct CodeObject {
  bool modern = false;  ///< The layout and opcodes of CPython 3.11 and 3.12 (else 3.8 to 3.10).
  int32_t argcount = 0;
  std::string bytecode;
  std::vector<PyRef> consts;
};
struct PyObject {
  enum Kind { Number, Bytes, Tuple, Code, Other } kind = Other;
  double number = 0;
  std::string bytes;
  std::vector<PyRef> items;
  std::shared_ptr<CodeObject> code;
};

/// Reads marshal data (Python/marshal.c, format version 4); every read checks its bounds.
class Marshal {
 public:
  explicit Marshal(const std::string& data) : d_(data) {}
  bool at_end() const { return pos_ == d_.size(); }
  /// One object; nullptr when the data is malformed or of a kind not read here.
  PyRef object(int depth = 0);

 private:
  bool take(size_t n) { return n <= d_.size() - pos_; }
  bool u8(uint8_t& v) {
    if (!take(1)) return false;
    v = uint8_t(d_[pos_++]);
    return true;
  }
  bool i32(int32_t& v) {
    if (!take(4)) return false;
    uint32_t u = 0;
    for (int i = 0; i < 4; ++i) u |= uint32_t(uint8_t(d_[pos_ + size_t(i)])) << (8 * i);
    pos_ += 4;
    v = int32_t(u);
    return true;
  }
  bool bytes(size_t n, std::string& out) {
    if (!take(n)) return false;
    out = d_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  PyRef code(int depth);
  PyRef sequence(size_t n, int depth);
  PyRef body(char type, int depth);

  const std::string& d_;
  size_t pos_ = 0;
  std::vector<PyRef> refs_;
};

PyRef Marshal::object(int depth) {
  uint8_t type;
  if (depth > 16 || !u8(type)) return nullptr;
  const bool flag_ref = type & 0x80;
  type &= 0x7f;
  if (type == 'r') {
    int32_t i;
    if (!i32(i) || i < 0 || size_t(i) >= refs_.size()) return nullptr;
    return refs_[size_t(i)];
  }
  // A container's reference slot comes before its items' (marshal's w_ref order).
  const size_t slot = refs_.size();
  if (flag_ref) refs_.push_back(nullptr);
  PyRef v = body(char(type), depth);
  if (v && flag_ref) refs_[slot] = v;
  return v;
}

PyRef Marshal::sequence(size_t n, int depth) {
  auto t = std::make_shared<PyObject>();
  t->kind = PyObject::Tuple;
  for (size_t i = 0; i < n; ++i) {
    PyRef item = object(depth + 1);
    if (!item) return nullptr;
    t->items.push_back(item);
  }
  return t;
}

PyRef Marshal::body(char type, int depth) {
  auto v = std::make_shared<PyObject>();
  int32_t n = 0;
  uint8_t n8 = 0;
  switch (type) {
    case 'N': case 'F': case 'T': case '.': return v;  // None, False, True, Ellipsis
    case 'i':
      if (!i32(n)) return nullptr;
      v->kind = PyObject::Number;
      v->number = n;
      return v;
    case 'g': {
      std::string raw;
      if (!bytes(8, raw)) return nullptr;
      uint64_t u = 0;
      for (int i = 0; i < 8; ++i) u |= uint64_t(uint8_t(raw[size_t(i)])) << (8 * i);
      std::memcpy(&v->number, &u, 8);
      v->kind = PyObject::Number;
      return v;
    }
    case 'l': {  // |n| base-2^15 digits, least significant first; the sign is n's
      if (!i32(n) || n < -64 || n > 64) return nullptr;
      double x = 0, place = 1;
      for (int i = 0; i < std::abs(n); ++i, place *= 32768) {
        std::string d;
        if (!bytes(2, d)) return nullptr;
        x += place * (uint8_t(d[0]) | (uint8_t(d[1]) << 8));
      }
      v->kind = PyObject::Number;
      v->number = n < 0 ? -x : x;
      return v;
    }
    case 's': case 't': case 'u': case 'a': case 'A':
      if (!i32(n) || n < 0 || !bytes(size_t(n), v->bytes)) return nullptr;
      v->kind = PyObject::Bytes;
      return v;
    case 'z': case 'Z':
      if (!u8(n8) || !bytes(n8, v->bytes)) return nullptr;
      v->kind = PyObject::Bytes;
      return v;
    case ')':
      if (!u8(n8)) return nullptr;
      return sequence(n8, depth);
    case '(': case '[': case '<': case '>':
      if (!i32(n) || n < 0 || n > 4096) return nullptr;
      return sequence(size_t(n), depth);
    case 'c':
      return code(depth);
    default:
      return nullptr;  // complex numbers, dicts, ...: not in an affine function
  }
}

PyRef Marshal::code(int depth) {
  // 3.11+: argcount, posonlyargcount, kwonlyargcount, stacksize, flags, then the bytecode;
  // 3.8-3.10: nlocals before stacksize, six 32-bit fields.
  auto c = std::make_shared<CodeObject>();
  int32_t field = 0;
  for (int i = 0; i < 5; ++i)
    if (!i32(i == 0 ? c->argcount : field)) return nullptr;
  uint8_t next;
  if (!take(1)) return nullptr;
  next = uint8_t(d_[pos_]) & 0x7f;
  c->modern = next == 's';
  if (!c->modern && !i32(field)) return nullptr;
  PyRef bc = object(depth + 1), consts = object(depth + 1);
  if (!bc || bc->kind != PyObject::Bytes || !consts || consts->kind != PyObject::Tuple) return nullptr;
  c->bytecode = bc->bytes;
  c->consts = consts->items;
  // The rest: names, then localsplusnames, localspluskinds, filename, name, qualname (3.11+) or
  // varnames, freevars, cellvars, filename, name (3.8-3.10); firstlineno; linetable (+ exceptiontable).
  for (int i = 0; i < 6; ++i)
    if (!object(depth + 1)) return nullptr;
  if (!i32(field)) return nullptr;
  for (int i = 0; i < (c->modern ? 2 : 1); ++i)
    if (!object(depth + 1)) return nullptr;
  auto v = std::make_shared<PyObject>();
  v->kind = PyObject::Code;
  v->code = c;
  return v;
}

/// A value on the evaluation stack: the argument's affine map, or a constant.
struct StackValue {
  bool of_x = false;
  Affine a;
  double c = 0;
};

enum class BinaryOp { Add, Subtract, Multiply, Divide };

std::optional<StackValue> apply(BinaryOp op, const StackValue& l, const StackValue& r) {
  StackValue out;
  if (!l.of_x && !r.of_x) {
    out.c = op == BinaryOp::Add ? l.c + r.c : op == BinaryOp::Subtract ? l.c - r.c
            : op == BinaryOp::Multiply ? l.c * r.c : l.c / r.c;
    return out;
  }
  out.of_x = true;
  const auto lin = [](const StackValue& v) { return v.of_x ? v.a : Affine{0, v.c}; };
  const Affine a = lin(l), b = lin(r);
  switch (op) {
    case BinaryOp::Add: out.a = {a.scale + b.scale, a.offset + b.offset}; return out;
    case BinaryOp::Subtract: out.a = {a.scale - b.scale, a.offset - b.offset}; return out;
    case BinaryOp::Multiply:
      if (l.of_x && r.of_x) return std::nullopt;
      out.a = l.of_x ? Affine{a.scale * r.c, a.offset * r.c} : Affine{b.scale * l.c, b.offset * l.c};
      return out;
    case BinaryOp::Divide:
      if (r.of_x || r.c == 0) return std::nullopt;
      out.a = {a.scale / r.c, a.offset / r.c};
      return out;
  }
  return std::nullopt;
}

/// Opcodes of the instructions read here: dis.opmap of CPython 3.11/3.12 and of 3.8-3.10.
struct Opcodes {
  int resume, load_fast, load_const, unary_negative, nop, return_value;
  int binary_op;                           ///< 3.11+: BINARY_OP with its NB_* argument; -1 before.
  int add, subtract, multiply, divide;     ///< 3.8-3.10: BINARY_ADD, ...; 3.11+: NB_ADD, ... arguments.
};
constexpr Opcodes kModern{151, 124, 100, 11, 9, 83, 122, 0, 10, 5, 11};
constexpr Opcodes kBefore311{-1, 124, 100, 11, 9, 83, -1, 23, 24, 20, 27};

std::optional<BinaryOp> binary_op(const Opcodes& ops, int op, int arg) {
  const int which = ops.binary_op >= 0 ? (op == ops.binary_op ? arg : -1) : op;
  if (which < 0) return std::nullopt;
  if (which == ops.add) return BinaryOp::Add;
  if (which == ops.subtract) return BinaryOp::Subtract;
  if (which == ops.multiply) return BinaryOp::Multiply;
  if (which == ops.divide) return BinaryOp::Divide;
  return std::nullopt;
}

std::optional<Affine> evaluate(const CodeObject& code) {
  const Opcodes& ops = code.modern ? kModern : kBefore311;
  const std::string& b = code.bytecode;
  if (code.argcount != 1 || b.size() % 2) return std::nullopt;
  // 3.11+ functions start with RESUME (3.13 renumbered the opcodes: its RESUME is not 151).
  if (code.modern && (b.size() < 2 || uint8_t(b[0]) != ops.resume)) return std::nullopt;
  std::vector<StackValue> stack;
  for (size_t i = 0; i < b.size(); i += 2) {
    const int op = uint8_t(b[i]), arg = uint8_t(b[i + 1]);
    if ((code.modern && (op == 0 || op == ops.resume)) || op == ops.nop) continue;  // CACHE, RESUME, NOP
    if (op == ops.load_fast) {
      if (arg != 0) return std::nullopt;
      stack.push_back({true, Affine{}, 0});
    } else if (op == ops.load_const) {
      if (size_t(arg) >= code.consts.size() || code.consts[size_t(arg)]->kind != PyObject::Number) return std::nullopt;
      stack.push_back({false, Affine{}, code.consts[size_t(arg)]->number});
    } else if (op == ops.unary_negative) {
      if (stack.empty()) return std::nullopt;
      StackValue& v = stack.back();
      v.a = {-v.a.scale, -v.a.offset};
      v.c = -v.c;
    } else if (const auto bin = binary_op(ops, op, arg)) {
      if (stack.size() < 2) return std::nullopt;
      const StackValue r = stack.back();
      stack.pop_back();
      const auto v = apply(*bin, stack.back(), r);
      if (!v) return std::nullopt;
      stack.back() = *v;
    } else if (op == ops.return_value) {
      if (stack.size() != 1 || !stack.back().of_x) return std::nullopt;
      const Affine a = stack.back().a;
      if (!std::isfinite(a.scale) || !std::isfinite(a.offset)) return std::nullopt;
      return a;
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Affine> lambda_affine(const std::string& code) {
  const std::optional<std::string> data = base64_decode(code);
  if (!data) return std::nullopt;
  Marshal m(*data);
  const PyRef obj = m.object();
  if (!obj || obj->kind != PyObject::Code || !m.at_end()) return std::nullopt;
  return evaluate(*obj->code);
}

}  // namespace trainer
