// Tests of cupti_tracer/json_writer: separators, escaping (checked by parsing the output with a
// real JSON parser), fixed-point doubles, misuse reporting and the FILE*/stream sinks.
#include "cupti_tracer/json_writer.h"

#include <cstdio>
#include <limits>
#include <sstream>
#include <string>

#include "catch2/catch.hpp"
#include "nlohmann/json.hpp"

namespace gpuprio::tracer {
namespace {

using nlohmann::json;

TEST_CASE("JsonWriter places separators between values and keys", "[json_writer]") {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("a");
  w.BeginArray();
  w.Int(-1);
  w.Uint(18446744073709551615ull);
  w.Bool(true);
  w.Null();
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.EndArray();
  w.Key("b");
  w.String("x");
  w.EndObject();
  REQUIRE(w.Finish().ok());
  CHECK(out == R"({"a":[-1,18446744073709551615,true,null,{},[]],"b":"x"})");
  CHECK(json::parse(out)["a"][1].get<uint64_t>() == 18446744073709551615ull);
}

TEST_CASE("JsonWriter writes doubles with exactly three decimals", "[json_writer]") {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Double(1.5);
  w.Double(1234567890.123);  // microseconds of a 20-minute trace keep their nanoseconds
  w.Double(-0.25);
  w.Double(std::numeric_limits<double>::quiet_NaN());
  w.Double(std::numeric_limits<double>::infinity());
  w.EndArray();
  REQUIRE(w.Finish().ok());
  CHECK(out == "[1.500,1234567890.123,-0.250,null,null]");
}

TEST_CASE("JsonWriter escapes strings so a real parser gets them back", "[json_writer]") {
  struct Case {
    std::string raw;
    std::string parsed;  // what a JSON parser must return
  };
  const Case cases[] = {
      {"plain", "plain"},
      {"quote \" backslash \\ slash /", "quote \" backslash \\ slash /"},
      {"nl\ncr\rtab\tbs\bff\f", "nl\ncr\rtab\tbs\bff\f"},
      {std::string("nul\0x\x01\x1f", 7), std::string("nul\0x\x01\x1f", 7)},
      {"\x7f", "\x7f"},
      {"void k<\xc3\xa9>(float*)", "void k<\xc3\xa9>(float*)"},  // é stays as is
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},                  // U+1F600, four bytes
      {"lone \xff byte", "lone \xef\xbf\xbd byte"},                // not UTF-8: U+FFFD
      {"cut \xe2\x82", "cut \xef\xbf\xbd\xef\xbf\xbd"},            // truncated sequence
      {"overlong \xc0\xaf", "overlong \xef\xbf\xbd\xef\xbf\xbd"},
      {"surrogate \xed\xa0\x80", "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"too big \xf4\x90\x80\x80",
       "too big \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
  };
  for (const Case& c : cases) {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject();
    w.Key(c.raw);  // keys go through the same escaping
    w.String(c.raw);
    w.EndObject();
    REQUIRE(w.Finish().ok());
    INFO("output: " << out);
    json parsed;
    REQUIRE_NOTHROW(parsed = json::parse(out));
    REQUIRE(parsed.size() == 1);
    CHECK(parsed.begin().key() == c.parsed);
    CHECK(parsed.begin().value().get<std::string>() == c.parsed);
  }
}

TEST_CASE("JsonWriter reports misuse from Finish and writes nothing more", "[json_writer]") {
  std::string out;
  JsonWriter w(&out);
  SECTION("a value in an object without a key") {
    w.BeginObject();
    w.Int(1);
    w.EndObject();
    CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(out == "{");
  }
  SECTION("a key outside an object") {
    w.BeginArray();
    w.Key("k");
    CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("a key without its value") {
    w.BeginObject();
    w.Key("k");
    w.EndObject();
    CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("mismatched close") {
    w.BeginArray();
    w.EndObject();
    CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("a container left open") {
    w.BeginArray();
    CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("two top-level values") {
    w.Int(1);
    w.Int(2);
    CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(out == "1");
  }
  SECTION("nothing written") { CHECK(w.Finish().code() == absl::StatusCode::kFailedPrecondition); }
}

// A document large enough to cross the internal flush threshold several times.
void WriteBigDocument(JsonWriter& w) {
  w.BeginArray();
  for (int i = 0; i < 20000; ++i) {
    w.BeginObject();
    w.Key("name");
    w.String("kernel \"quoted\"");
    w.Key("i");
    w.Int(i);
    w.EndObject();
  }
  w.EndArray();
}

TEST_CASE("JsonWriter writes the same bytes to a string, a FILE* and a stream", "[json_writer]") {
  std::string expected;
  {
    JsonWriter w(&expected);
    WriteBigDocument(w);
    REQUIRE(w.Finish().ok());
  }
  REQUIRE(expected.size() > 200 * 1024);

  std::ostringstream stream;
  {
    JsonWriter w(&stream);
    WriteBigDocument(w);
    CHECK(w.Finish().ok());
  }
  CHECK(stream.str() == expected);

  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    JsonWriter w(file);
    WriteBigDocument(w);
    CHECK(w.Finish().ok());
  }
  std::rewind(file);
  std::string read_back;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) read_back.append(chunk, n);
  std::fclose(file);
  CHECK(read_back == expected);
  CHECK(json::parse(read_back).size() == 20000);
}

TEST_CASE("JsonWriter reports a failed write", "[json_writer]") {
  std::FILE* full = std::fopen("/dev/full", "w");
  if (full == nullptr) return;  // no /dev/full here: nothing to check
  {
    JsonWriter w(full);
    WriteBigDocument(w);
    CHECK(w.Finish().code() == absl::StatusCode::kDataLoss);
  }
  std::fclose(full);
}

}  // namespace
}  // namespace gpuprio::tracer
