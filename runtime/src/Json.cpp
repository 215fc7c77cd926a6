//===- Json.cpp - The JSON the runtime reads ------------------------------===//

#include "Json.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

using namespace tessera::runtime;

const JsonValue *JsonValue::find(std::string_view name) const {
  for (const auto &member : members)
    if (member.first == name)
      return &member.second;
  return nullptr;
}

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// Appends code point `code` (at most 0x10FFFF) as UTF-8.
void appendUtf8(std::string &into, uint32_t code) {
  if (code < 0x80) {
    into += static_cast<char>(code);
  } else if (code < 0x800) {
    into += static_cast<char>(0xC0 | code >> 6);
    into += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    into += static_cast<char>(0xE0 | code >> 12);
    into += static_cast<char>(0x80 | (code >> 6 & 0x3F));
    into += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    into += static_cast<char>(0xF0 | code >> 18);
    into += static_cast<char>(0x80 | (code >> 12 & 0x3F));
    into += static_cast<char>(0x80 | (code >> 6 & 0x3F));
    into += static_cast<char>(0x80 | (code & 0x3F));
  }
}

/// A recursive-descent reader. Each value is read once, from where the
/// last one ended, and the nesting depth travels down as an argument: no
/// step rescans the text or recounts the depth, so the time is linear.
class JsonReader {
public:
  explicit JsonReader(std::string_view text) : text(text) {}
  Status readDocument(JsonValue &value);

private:
  Status fail(const std::string &message) const {
    return dataError("at byte " + std::to_string(position) + ": " + message);
  }
  bool atEnd() const { return position == text.size(); }
  bool peek(char c) const { return !atEnd() && text[position] == c; }
  bool consume(char c) {
    if (!peek(c))
      return false;
    ++position;
    return true;
  }
  void skipWhitespace();
  Status readValue(JsonValue &value, int depth);
  Status readArray(JsonValue &value, int depth);
  Status readObject(JsonValue &value, int depth);
  Status checkUniqueNames(const JsonValue &object, size_t start);
  Status readString(std::string &into);
  Status readEscape(std::string &into);
  Status readCodeUnit(uint32_t &unit);
  Status readNumber(JsonValue &value);
  Status readLiteral(std::string_view word);

  std::string_view text;
  size_t position = 0;
};

void JsonReader::skipWhitespace() {
  while (!atEnd() && (text[position] == ' ' || text[position] == '\t' ||
                      text[position] == '\n' || text[position] == '\r'))
    ++position;
}

Status JsonReader::readDocument(JsonValue &value) {
  if (Status status = readValue(value, 0); !status.ok())
    return status;
  skipWhitespace();
  if (!atEnd())
    return fail("expected the end of the text after the value");
  return Status::success();
}

Status JsonReader::readValue(JsonValue &value, int depth) {
  skipWhitespace();
  if (atEnd())
    return fail("expected a value, found the end of the text");
  switch (text[position]) {
  case '{':
    return readObject(value, depth + 1);
  case '[':
    return readArray(value, depth + 1);
  case '"':
    value.kind = JsonValue::Kind::String;
    return readString(value.string);
  case 't':
    value.kind = JsonValue::Kind::Boolean;
    value.boolean = true;
    return readLiteral("true");
  case 'f':
    value.kind = JsonValue::Kind::Boolean;
    return readLiteral("false");
  case 'n':
    return readLiteral("null");
  default:
    if (peek('-') || isDigit(text[position]))
      return readNumber(value);
    return fail("expected a value");
  }
}

Status JsonReader::readArray(JsonValue &value, int depth) {
  if (depth > kMaxJsonDepth)
    return fail("arrays and objects nest deeper than " +
                std::to_string(kMaxJsonDepth) + " levels");
  ++position;
  value.kind = JsonValue::Kind::Array;
  skipWhitespace();
  if (consume(']'))
    return Status::success();
  for (;;) {
    value.array.emplace_back();
    if (Status status = readValue(value.array.back(), depth); !status.ok())
      return status;
    skipWhitespace();
    if (consume(']'))
      return Status::success();
    if (!consume(','))
      return fail("expected ',' or ']' in an array");
  }
}

Status JsonReader::readObject(JsonValue &value, int depth) {
  if (depth > kMaxJsonDepth)
    return fail("arrays and objects nest deeper than " +
                std::to_string(kMaxJsonDepth) + " levels");
  size_t start = position++;
  value.kind = JsonValue::Kind::Object;
  skipWhitespace();
  if (consume('}'))
    return Status::success();
  for (;;) {
    skipWhitespace();
    if (!peek('"'))
      return fail("expected a member name in double quotes");
    value.members.emplace_back();
    auto &member = value.members.back();
    if (Status status = readString(member.first); !status.ok())
      return status;
    skipWhitespace();
    if (!consume(':'))
      return fail("expected ':' after a member name");
    if (Status status = readValue(member.second, depth); !status.ok())
      return status;
    skipWhitespace();
    if (consume('}'))
      return checkUniqueNames(value, start);
    if (!consume(','))
      return fail("expected ',' or '}' in an object");
  }
}

Status JsonReader::checkUniqueNames(const JsonValue &object, size_t start) {
  std::vector<std::string_view> names;
  names.reserve(object.members.size());
  for (const auto &member : object.members)
    names.push_back(member.first);
  std::sort(names.begin(), names.end());
  auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice == names.end())
    return Status::success();
  return dataError("at byte " + std::to_string(start) +
                   ": the object names member '" + std::string(*twice) +
                   "' twice");
}

Status JsonReader::readString(std::string &into) {
  ++position;
  for (;;) {
    if (atEnd())
      return fail("expected the string's closing '\"'");
    unsigned char c = text[position];
    if (c == '"') {
      ++position;
      return Status::success();
    }
    if (c < 0x20)
      return fail("control character in a string (JSON escapes them)");
    if (c == '\\') {
      if (Status status = readEscape(into); !status.ok())
        return status;
      continue;
    }
    into += static_cast<char>(c);
    ++position;
  }
}

Status JsonReader::readEscape(std::string &into) {
  ++position;
  if (atEnd())
    return fail("expected an escape after '\\'");
  char c = text[position++];
  switch (c) {
  case '"':
  case '\\':
  case '/':
    into += c;
    return Status::success();
  case 'b':
    into += '\b';
    return Status::success();
  case 'f':
    into += '\f';
    return Status::success();
  case 'n':
    into += '\n';
    return Status::success();
  case 'r':
    into += '\r';
    return Status::success();
  case 't':
    into += '\t';
    return Status::success();
  case 'u':
    break;
  default:
    --position;
    return fail(std::string("unknown escape '\\") + c + "'");
  }
  uint32_t code = 0;
  if (Status status = readCodeUnit(code); !status.ok())
    return status;
  if (code >= 0xDC00 && code <= 0xDFFF)
    return fail("a low surrogate without a high one before it");
  if (code >= 0xD800 && code <= 0xDBFF) {
    uint32_t low = 0;
    if (!consume('\\') || !consume('u'))
      return fail("expected a low surrogate '\\u' after a high one");
    if (Status status = readCodeUnit(low); !status.ok())
      return status;
    if (low < 0xDC00 || low > 0xDFFF)
      return fail("expected a low surrogate after a high one");
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  }
  appendUtf8(into, code);
  return Status::success();
}

Status JsonReader::readCodeUnit(uint32_t &unit) {
  if (text.size() - position < 4)
    return fail("expected four hex digits after '\\u'");
  std::string_view digits = text.substr(position, 4);
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + 4, unit, 16);
  if (error != std::errc() || end != digits.data() + 4 || digits[0] == '-' ||
      digits[0] == '+')
    return fail("expected four hex digits after '\\u'");
  position += 4;
  return Status::success();
}

Status JsonReader::readNumber(JsonValue &value) {
  size_t start = position;
  auto skipDigits = [&] {
    while (!atEnd() && isDigit(text[position]))
      ++position;
  };
  consume('-');
  if (atEnd() || !isDigit(text[position]))
    return fail("expected a digit");
  if (!consume('0'))
    skipDigits();
  if (consume('.')) {
    if (atEnd() || !isDigit(text[position]))
      return fail("expected a digit after '.'");
    skipDigits();
  }
  if (consume('e') || consume('E')) {
    if (!consume('+'))
      consume('-');
    if (atEnd() || !isDigit(text[position]))
      return fail("expected a digit in the exponent");
    skipDigits();
  }
  const char *first = text.data() + start, *last = text.data() + position;
  auto [end, error] = std::from_chars(first, last, value.number);
  if (error != std::errc() || end != last) {
    position = start;
    return fail("the number '" + std::string(first, last) +
                "' is out of range");
  }
  value.kind = JsonValue::Kind::Number;
  return Status::success();
}

Status JsonReader::readLiteral(std::string_view word) {
  if (text.substr(position, word.size()) != word)
    return fail("expected a value");
  position += word.size();
  return Status::success();
}

} // namespace

Expected<JsonValue> tessera::runtime::parseJson(std::string_view text) {
  JsonValue value;
  if (Status status = JsonReader(text).readDocument(value); !status.ok())
    return status;
  return value;
}
