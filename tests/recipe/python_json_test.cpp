// Python-style JSON (encoding spec §3.7), golden table verbatim from the spec.
#include "recipe/python_json.h"

#include <gtest/gtest.h>

namespace deepinfer::recipe {
namespace {

std::string py(std::string_view json_text) {
  auto v = parse_json(json_text);
  EXPECT_TRUE(v.ok()) << json_text;
  return to_python_json(v.value());
}

TEST(PythonJson, NumberGoldenTable) {
  EXPECT_EQ(py("0"), "0");
  EXPECT_EQ(py("-0.0"), "-0.0");
  EXPECT_EQ(py("1.0"), "1.0");
  EXPECT_EQ(py("1e5"), "100000.0");
  EXPECT_EQ(py("1e16"), "1e+16");
  EXPECT_EQ(py("1.5e-7"), "1.5e-07");
  EXPECT_EQ(py("0.00001"), "1e-05");
  EXPECT_EQ(py("0.0001"), "0.0001");
  EXPECT_EQ(py("0.000123"), "0.000123");
  EXPECT_EQ(py("1e-10"), "1e-10");
  EXPECT_EQ(py("3.14159"), "3.14159");
  EXPECT_EQ(py("123456789012345678901234567890"), "1.2345678901234568e+29");
  EXPECT_EQ(py("2.5e300"), "2.5e+300");
  EXPECT_EQ(py("18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(py("-9223372036854775808"), "-9223372036854775808");
  EXPECT_EQ(py("123.456"), "123.456");
  EXPECT_EQ(py("1e15"), "1000000000000000.0");
}

TEST(PythonJson, SeparatorsOrderAndEscapes) {
  EXPECT_EQ(py(R"({"b":[1,2],"a":{"x":true,"y":null}})"),
            R"({"b": [1, 2], "a": {"x": true, "y": null}})");
  EXPECT_EQ(py(R"("q\"b\\n\n\t\u0001/é\u2028")"), "\"q\\\"b\\\\n\\n\\t\\u0001/é\u2028\"");
  auto v = parse_json(R"({"a":[1,{"b":"c"}]})");
  EXPECT_EQ(to_compact_json(v.value()), R"({"a":[1,{"b":"c"}]})");
}

}  // namespace
}  // namespace deepinfer::recipe
