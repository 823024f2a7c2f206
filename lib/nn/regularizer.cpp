#include "nn/regularizer.h"

#include <regex>
#include <vector>

#include "config/params.h"

namespace trainer {

namespace {

const std::vector<std::string> kRegularizers = {"L1", "L2", "L1L2"};

/// Keras's class name for a type as written ("l1l2" -> "L1L2"), "" if unknown.
std::string canonical(const std::string& t) {
  if (t == "L1" || t == "l1") return "L1";
  if (t == "L2" || t == "l2") return "L2";
  if (t == "L1L2" || t == "l1l2") return "L1L2";  // and Keras 3's alias
  return "";
}

}  // namespace

Regularizer read_regularizer(ParamReader& p, const std::string& key) {
  p.skip(key);  // a known key, also when absent (for the unknown-key message)
  if (!p.given(key)) return {};
  const YAML::Node node = p.get_node(key);
  Regularizer r;
  if (node.IsScalar()) {
    const std::string text = node.Scalar();
    if (text.find('(') != std::string::npos) {  // regularizers.l2(1e-4)
      static const std::regex one(R"(^(?:.*\.)?(l1|l2|L1|L2)\(\s*(?:(l[12])\s*=\s*)?([0-9.eE+-]+)\s*\)$)");
      std::smatch m;
      const bool matched = std::regex_match(text, m, one) && (!m[2].matched || canonical(m[2]) == canonical(m[1]));
      const std::string mapping =
          matched
              ? "{type: " + canonical(m[1]) + ", " + (canonical(m[1]) == "L1" ? "l1" : "l2") + ": " + m[3].str() + "}"
              : "{type: L2, l2: <factor>} (or {type: L1, l1: <factor>}, {type: L1L2, l1: <factor>, l2: <factor>})";
      p.fail(key, "'" + text + "' is Python; write the mapping " + mapping);
    }
    if (text == "l1_l2") return Regularizer{0.01, 0.01};  // tf.keras 2's l1_l2(); Keras 3 has no such name
    const std::string type = canonical(text);
    if (type == "L1L2")
      p.fail(key, "'" + text + "' gives no factors (Keras 3's L1L2() has l1 = l2 = 0 and does nothing); write "
                  "{type: L1L2, l1: <factor>, l2: <factor>}");
    if (type.empty())
      p.fail(key, "'" + text + "' is not a regularizer" + did_you_mean(text, {"l1", "l2", "l1_l2"}) +
                      "; use l1, l2, l1_l2, or a mapping {type: L1 | L2 | L1L2, l1: ..., l2: ...}");
    (type == "L1" ? r.l1 : r.l2) = 0.01;  // Keras's L1() and L2()
    return r;
  }
  if (!node.IsMap())
    p.fail(key, "must be l1, l2 or a mapping such as {type: L2, l2: 0.0001}");
  ParamReader q(node, p.file(), p.what() + " " + key);
  const std::string given = q.get_string("type", std::nullopt);
  const std::string type = canonical(given);
  if (type.empty())
    q.fail("type", "is '" + given + "'" + did_you_mean(given, kRegularizers) + "; use one of: L1, L2, L1L2 "
                   "(keras.regularizers)");
  if (type == "L1L2" && !q.has("l1") && !q.has("l2"))
    q.fail("an L1L2 without l1 or l2 does nothing (Keras 3's defaults are 0 and 0); give them, e.g. "
           "{type: L1L2, l1: 0.00001, l2: 0.0001}");
  const double def = type == "L1L2" ? 0.0 : 0.01;
  if (type != "L2") r.l1 = q.get_double("l1", def, 0.0, 1e6);
  if (type != "L1") r.l2 = q.get_double("l2", def, 0.0, 1e6);
  q.finish();
  return r;
}

}  // namespace trainer
