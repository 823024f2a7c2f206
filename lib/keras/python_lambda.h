#pragma once
// What a Keras Lambda layer computes, read from its stored Python function:
// Keras saves a Lambda's function as marshal.dumps(f.__code__) in base64
// (keras.utils.func_dump), which holds CPython bytecode. The functions that
// preprocessing Lambdas hold in practice, `lambda x: x / 255` or
// `lambda x: x / 127.5 - 1`, are affine in x and are Rescaling layers.
#include <optional>
#include <string>

namespace trainer {

/// y = x * scale + offset.
struct Affine {
  double scale = 1, offset = 0;
};

/// The affine map that a one-argument Python function computes of its
/// argument, when its body is built from the argument, numeric constants and
/// +, -, *, / with at most one operand depending on the argument (x / 255,
/// x * (1 / 255.), 2 * x - 1, (x - 127.5) / 127.5). code is the base64 text
/// of marshal.dumps(f.__code__) (whitespace allowed). Bytecode of CPython
/// 3.8 to 3.12 is read (the marshal and opcode layouts of
/// docs.python.org/3/library/dis.html and Python/marshal.c of those
/// versions); std::nullopt for anything else: other Python versions, other
/// operations (calls, attributes, globals, closures), or malformed data.
/// Never throws on bad input.
std::optional<Affine> lambda_affine(const std::string& code);

/// base64 (RFC 4648, '=' padding, whitespace skipped) decoded; std::nullopt
/// when text holds another character or is cut short.
std::optional<std::string> base64_decode(const std::string& text);

}  // namespace trainer
