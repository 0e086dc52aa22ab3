// JsonWriter: separators from a stack of open containers, escaping with UTF-8 validation.
#include "cupti_tracer/json_writer.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace gpuprio::tracer {
namespace {

// Output is pushed to a FILE*/stream in chunks of about this size, so a large trace needs
// little memory.
constexpr size_t kFlushThreshold = 64 * 1024;

constexpr char kReplacement[] = "\\ufffd";  // U+FFFD, for bytes that are not UTF-8

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0 if it is not one.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  size_t length;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

JsonWriter::JsonWriter(std::string* out) : out_(out) {}

JsonWriter::JsonWriter(std::FILE* file) : out_(&buffer_), file_(file) {}

JsonWriter::JsonWriter(std::ostream* stream) : out_(&buffer_), stream_(stream) {}

JsonWriter::~JsonWriter() { Flush().IgnoreError(); }

void JsonWriter::Fail(absl::string_view why) {
  if (error_.empty()) error_ = std::string(why);
}

bool JsonWriter::BeginValue() {
  if (!error_.empty()) return false;
  if (stack_.empty()) {
    if (top_level_values_ > 0) {
      Fail("a second top-level value");
      return false;
    }
    ++top_level_values_;
    return true;
  }
  Level& level = stack_.back();
  if (level.is_object) {
    if (!level.awaiting_value) {
      Fail("a value inside an object without a Key()");
      return false;
    }
    level.awaiting_value = false;  // the key wrote the separator
    return true;
  }
  if (level.count++ > 0) out_->push_back(',');
  return true;
}

void JsonWriter::BeginObject() {
  if (!BeginValue()) return;
  out_->push_back('{');
  stack_.push_back(Level{/*is_object=*/true});
}

void JsonWriter::EndObject() {
  if (!error_.empty()) return;
  if (stack_.empty() || !stack_.back().is_object || stack_.back().awaiting_value) {
    Fail("EndObject() without an open object, or after a Key() with no value");
    return;
  }
  stack_.pop_back();
  out_->push_back('}');
  MaybeFlush();
}

void JsonWriter::BeginArray() {
  if (!BeginValue()) return;
  out_->push_back('[');
  stack_.push_back(Level{/*is_object=*/false});
}

void JsonWriter::EndArray() {
  if (!error_.empty()) return;
  if (stack_.empty() || stack_.back().is_object) {
    Fail("EndArray() without an open array");
    return;
  }
  stack_.pop_back();
  out_->push_back(']');
  MaybeFlush();
}

void JsonWriter::Key(absl::string_view key) {
  if (!error_.empty()) return;
  if (stack_.empty() || !stack_.back().is_object || stack_.back().awaiting_value) {
    Fail("Key() outside an object, or two keys in a row");
    return;
  }
  Level& level = stack_.back();
  if (level.count++ > 0) out_->push_back(',');
  WriteEscaped(key);
  out_->push_back(':');
  level.awaiting_value = true;
}

void JsonWriter::String(absl::string_view value) {
  if (!BeginValue()) return;
  WriteEscaped(value);
  MaybeFlush();
}

void JsonWriter::Int(int64_t value) {
  if (!BeginValue()) return;
  absl::StrAppend(out_, value);
}

void JsonWriter::Uint(uint64_t value) {
  if (!BeginValue()) return;
  absl::StrAppend(out_, value);
}

void JsonWriter::Double(double value) {
  if (!BeginValue()) return;
  if (!std::isfinite(value)) {
    out_->append("null");
    return;
  }
  // %.3f of the largest double is ~310 characters.
  char text[400];
  const int n = std::snprintf(text, sizeof(text), "%.3f", value);
  if (n > 0 && static_cast<size_t>(n) < sizeof(text)) {
    out_->append(text, static_cast<size_t>(n));
  } else {
    out_->append("null");
  }
}

void JsonWriter::Bool(bool value) {
  if (!BeginValue()) return;
  out_->append(value ? "true" : "false");
}

void JsonWriter::Null() {
  if (!BeginValue()) return;
  out_->append("null");
}

void JsonWriter::WriteEscaped(absl::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_->push_back('"');
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out_->append(kReplacement);
        ++i;  // resynchronise on the next byte
      } else {
        out_->append(text.data() + i, length);
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': out_->append("\\\""); break;
      case '\\': out_->append("\\\\"); break;
      case '\n': out_->append("\\n"); break;
      case '\r': out_->append("\\r"); break;
      case '\t': out_->append("\\t"); break;
      case '\b': out_->append("\\b"); break;
      case '\f': out_->append("\\f"); break;
      default:
        if (c < 0x20) {
          const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          out_->append(escape, sizeof(escape));
        } else {
          out_->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out_->push_back('"');
}

void JsonWriter::MaybeFlush() {
  if (out_ == &buffer_ && buffer_.size() >= kFlushThreshold) Flush().IgnoreError();
}

absl::Status JsonWriter::Flush() {
  if (out_ == &buffer_ && !buffer_.empty()) {
    if (file_ != nullptr) {
      if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
        io_failed_ = true;
      }
    } else if (stream_ != nullptr) {
      stream_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
      if (!*stream_) io_failed_ = true;
    }
    buffer_.clear();
  }
  if (file_ != nullptr && std::fflush(file_) != 0) io_failed_ = true;
  if (stream_ != nullptr && !stream_->flush()) io_failed_ = true;
  if (io_failed_) return absl::DataLossError("JsonWriter: writing the output failed");
  return absl::OkStatus();
}

absl::Status JsonWriter::Finish() {
  absl::Status flushed = Flush();
  if (!error_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("JsonWriter misuse: ", error_));
  }
  if (!stack_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("JsonWriter: ", stack_.size(), " container(s) left open"));
  }
  if (top_level_values_ != 1) {
    return absl::FailedPreconditionError("JsonWriter: no value written");
  }
  return flushed;
}

}  // namespace gpuprio::tracer
