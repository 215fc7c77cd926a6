//===- JsonTest.cpp - The runtime's JSON reader ---------------------------===//

#include "Json.h"

#include <gtest/gtest.h>

#include <string>

using namespace tessera::runtime;

namespace {

/// Expects `text` to be refused with a data error that mentions `part`.
void expectRefused(const std::string &text, const std::string &part) {
  Expected<JsonValue> value = parseJson(text);
  ASSERT_FALSE(value.ok()) << text;
  EXPECT_EQ(value.getStatus().getCode(), StatusCode::DataError);
  EXPECT_NE(value.message().find(part), std::string::npos)
      << "'" << part << "' not in: " << value.message();
}

TEST(JsonTest, ValuesReadAsWritten) {
  Expected<JsonValue> value = parseJson(
      R"( {"name": "a\"b\\c\u00e9\ud83d\ude00", "list": [0, -1.5, 2e3, true,)"
      R"( false, null], "empty": {}} )");
  ASSERT_TRUE(value.ok()) << value.message();
  ASSERT_TRUE(value->isObject());
  ASSERT_EQ(value->members.size(), 3u);
  EXPECT_EQ(value->members[0].first, "name");
  EXPECT_EQ(value->find("name")->string, "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80");
  const JsonValue *list = value->find("list");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->kind, JsonValue::Kind::Array);
  ASSERT_EQ(list->array.size(), 6u);
  EXPECT_EQ(list->array[0].number, 0);
  EXPECT_EQ(list->array[1].number, -1.5);
  EXPECT_EQ(list->array[2].number, 2000);
  EXPECT_TRUE(list->array[3].boolean);
  EXPECT_EQ(list->array[4].kind, JsonValue::Kind::Boolean);
  EXPECT_FALSE(list->array[4].boolean);
  EXPECT_EQ(list->array[5].kind, JsonValue::Kind::Null);
  EXPECT_TRUE(value->find("empty")->isObject());
  EXPECT_EQ(value->find("missing"), nullptr);
}

TEST(JsonTest, MalformedTextIsRefusedWithItsPlace) {
  expectRefused("", "at byte 0: expected a value");
  expectRefused("{\"a\": 1,}", "at byte 8: expected a member name");
  expectRefused("[1 2]", "at byte 3: expected ',' or ']'");
  expectRefused("{\"a\" 1}", "expected ':'");
  expectRefused("\"open", "closing");
  expectRefused("\"tab\there\"", "control character");
  expectRefused("\"\\x\"", "unknown escape");
  expectRefused("\"\\ud800\"", "low surrogate");
  expectRefused("01", "expected the end of the text");
  expectRefused("1.", "expected a digit after '.'");
  expectRefused("1e999", "out of range");
  expectRefused("tru", "expected a value");
  expectRefused("{} {}", "expected the end of the text");
}

TEST(JsonTest, NamesGivenTwiceAreRefused) {
  expectRefused("{\"a\": 1, \"b\": 2, \"a\": 3}", "'a' twice");
}

TEST(JsonTest, NestingIsLimited) {
  std::string deepest =
      std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parseJson(deepest).ok());
  expectRefused("[" + deepest + "]", "nest deeper than 1000 levels");
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i)
    objects += "{\"a\":";
  expectRefused(objects + "1" + std::string(kMaxJsonDepth + 1, '}'),
                "nest deeper than 1000 levels");
}

} // namespace
