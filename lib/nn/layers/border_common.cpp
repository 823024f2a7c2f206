#include "nn/layers/border_common.h"

namespace trainer {

namespace {

/// p.fail at key, naming Keras's forms of the value v.
[[noreturn]] void bad_border(ParamReader& p, const std::string& key, const YAML::Node& v) {
  const bool tuple = v.IsScalar() && v.Scalar().rfind('(', 0) == 0;
  p.fail(key, "must be an integer >= 0, [height, width] or [[top, bottom], [left, right]] (Keras's forms; a "
                  "Python tuple is a YAML list), got " + YAML::Dump(v) +
                  (tuple ? " (a Python tuple: write it as a list, e.g. [[1, 1], [2, 2]] for ((1, 1), (2, 2)); "
                           "inside { } a tuple's commas also split the entry, which cuts the value short)"
                         : ""));
}

/// The integer >= 0 of entry v of the value whole, else bad_border.
int side(ParamReader& p, const std::string& key, const YAML::Node& v, const YAML::Node& whole) {
  int x = -1;
  if (!v.IsScalar() || !YAML::convert<int>::decode(v, x) || x < 0 || x > 1000000) bad_border(p, key, whole);
  return x;
}

}  // namespace

Crop2DParams read_border(ParamReader& p, const std::string& key, int def) {
  Crop2DParams c{def, def, def, def};
  const YAML::Node v = p.get_node(key);
  if (!v) return c;
  auto pair = [](const YAML::Node& n) { return n.IsSequence() && n.size() == 2; };
  if (v.IsScalar()) {
    c.top = c.bottom = c.left = c.right = side(p, key, v, v);
  } else if (pair(v) && v[0].IsScalar() && v[1].IsScalar()) {
    c.top = c.bottom = side(p, key, v[0], v);
    c.left = c.right = side(p, key, v[1], v);
  } else if (pair(v) && pair(v[0]) && pair(v[1])) {
    c.top = side(p, key, v[0][0], v), c.bottom = side(p, key, v[0][1], v);
    c.left = side(p, key, v[1][0], v), c.right = side(p, key, v[1][1], v);
  } else {
    bad_border(p, key, v);
  }
  return c;
}

}  // namespace trainer
