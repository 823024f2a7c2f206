// json_string and json_number: the --log-format json lines stay valid JSON
// for any file name and any logged value.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/json_text.h"

using namespace trainer;

TEST_CASE("json_string escapes quotes and control characters and replaces invalid UTF-8", "[log]") {
  CHECK(json_string("runs/a/final.h5") == "\"runs/a/final.h5\"");
  CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_string(std::string("tab\there\nnul", 12) + std::string(1, '\0')) == "\"tab\\u0009here\\u000anul\\u0000\"");
  CHECK(json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xac") == "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xac\"");
  // A Latin-1 name, a lone continuation byte, an overlong '/', a surrogate, a truncated sequence at the end.
  CHECK(json_string("caf\xe9.png") == "\"caf\\ufffd.png\"");
  CHECK(json_string("\x80x") == "\"\\ufffdx\"");
  CHECK(json_string("\xc0\xaf") == "\"\\ufffd\\ufffd\"");
  CHECK(json_string("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");
  CHECK(json_string("ok\xe2\x82") == "\"ok\\ufffd\\ufffd\"");
}

TEST_CASE("json_number writes null for NaN and infinities", "[log]") {
  CHECK(json_number(0.25) == "0.25");
  CHECK(json_number(1.0 / 3) == "0.333333333");
  CHECK(json_number(std::nan("")) == "null");
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_number(-std::numeric_limits<double>::infinity()) == "null");
}
