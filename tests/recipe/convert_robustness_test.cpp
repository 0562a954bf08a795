// Wrong JSON types anywhere in a request give a BadRequest error with a detail, never a crash
// or an escaping exception: every value of every seed request of the fuzz corpus is replaced
// by values of each other JSON kind and converted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "recipe/convert.h"

namespace deepinfer::recipe {
namespace {

const Json kReplacements[] = {nullptr,
                              Json(true),
                              Json(0),
                              Json(-1),
                              Json(1.5),
                              Json(""),
                              Json("x"),
                              JsonArray{},
                              JsonArray{Json(1)},
                              JsonObject{},
                              Json(18446744073709551615ull)};

// Calls `visit` with a pointer to every value below `value` (including itself).
void for_each_value(Json& value, const std::function<void(Json&)>& visit) {
  visit(value);
  if (JsonObject* object = value.if_object()) {
    for (auto& member : *object) for_each_value(member.value(), visit);
  } else if (JsonArray* array = value.if_array()) {
    for (Json& element : *array) for_each_value(element, visit);
  }
}

size_t count_values(Json& value) {
  size_t count = 0;
  for_each_value(value, [&](Json&) { ++count; });
  return count;
}

TEST(ConvertRobustness, EveryValueReplacedByEveryKind) {
  const std::filesystem::path corpus =
      std::filesystem::path(DEEPINFER_SOURCE_DIR) / "fuzz/corpus/recipe_convert_fuzz";
  size_t seeds = 0;
  size_t conversions = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(data.empty());
    const Protocol protocol = static_cast<Protocol>((data[0] - '0') % 3);
    auto parsed = parse_json(std::string_view(data).substr(1));
    ASSERT_TRUE(parsed.ok()) << entry.path();
    ++seeds;
    Json original = parsed.value();
    const size_t total = count_values(original);
    for (size_t target = 0; target < total; ++target) {
      for (const Json& replacement : kReplacements) {
        Json body = original;
        size_t index = 0;
        for_each_value(body, [&](Json& value) {
          if (index++ == target) value = replacement;
        });
        auto result = convert_request(protocol, body);
        ++conversions;
        if (!result.ok()) {
          EXPECT_EQ(result.error().kind, ConversionError::Kind::BadRequest)
              << entry.path() << " value " << target << ": " << result.error().detail;
          EXPECT_FALSE(result.error().detail.empty());
        }
      }
    }
  }
  EXPECT_GE(seeds, 12u);
  EXPECT_GT(conversions, 1000u);
}

}  // namespace
}  // namespace deepinfer::recipe
