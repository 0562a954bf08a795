#include "common/json.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(Json, KeepsKeyOrderAndNumberKinds) {
  auto parsed = parse_json(R"({"b":1,"a":1.0,"c":18446744073709551615})");
  ASSERT_TRUE(parsed.ok());
  const auto& obj = parsed.value().as_object();
  auto it = obj.begin();
  EXPECT_EQ(it->key(), "b");
  EXPECT_TRUE(it->value().is_int64());
  ++it;
  EXPECT_EQ(it->key(), "a");
  EXPECT_TRUE(it->value().is_double());
  ++it;
  EXPECT_TRUE(it->value().is_uint64());
}

TEST(Json, RejectsInvalidUtf8AndTrailingGarbage) {
  EXPECT_FALSE(parse_json("\"\xff\"").ok());
  EXPECT_FALSE(parse_json("{} x").ok());
  EXPECT_FALSE(parse_json("").ok());
}

}  // namespace
}  // namespace deepinfer
