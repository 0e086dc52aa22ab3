// JsonWriter: a small streaming JSON writer, the one place that escapes strings and places
// separators, so no caller tracks commas by hand (the tracer writes the Chrome trace with it).
// Output goes to a std::string, a FILE* or a std::ostream; misuse is reported by Finish().
#ifndef GPUPRIO_CUPTI_TRACER_JSON_WRITER_H_
#define GPUPRIO_CUPTI_TRACER_JSON_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuprio::tracer {

// Usage:
//   std::string out;
//   JsonWriter w(&out);
//   w.BeginObject(); w.Key("ts"); w.Double(1.5); w.EndObject();
//   absl::Status s = w.Finish();  // out == {"ts":1.500}
//
// Inside an object every value must follow a Key(); at the top level exactly one value may be
// written. A call that breaks these rules writes nothing and makes Finish() return
// FailedPrecondition (the writer never aborts: it runs in a traced program's exit path).
//
// Strings are written as valid JSON: quotes, backslashes and control characters are escaped,
// and bytes that are not well-formed UTF-8 are replaced by U+FFFD, so any byte string (a kernel
// name, a thread name) yields parseable output.
//
// Not thread-safe; one writer per output.
class JsonWriter {
 public:
  // Appends to `*out`, which must outlive the writer.
  explicit JsonWriter(std::string* out);
  // Writes to `file` (not closed here) through an internal buffer; Flush()/Finish() push it out.
  explicit JsonWriter(std::FILE* file);
  // Same, to a stream.
  explicit JsonWriter(std::ostream* stream);
  // Flushes what is buffered; does not check completeness (call Finish() for that).
  ~JsonWriter();

  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(absl::string_view key);

  void String(absl::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  // Fixed notation with exactly 3 decimals (timestamps in microseconds carry nanoseconds);
  // NaN and infinities, which JSON cannot express, are written as null.
  void Double(double value);
  void Bool(bool value);
  void Null();

  // Pushes buffered output to the FILE*/stream. Errors if a write failed.
  absl::Status Flush();
  // Flush() plus: every container closed, exactly one top-level value, no misuse so far.
  absl::Status Finish();

 private:
  struct Level {
    bool is_object = false;
    int64_t count = 0;         // values (arrays) or keys (objects) written so far
    bool awaiting_value = false;  // objects: a Key() was written, its value not yet
  };

  // Writes the separator a new value needs; false (and marks misuse) if a value is not allowed.
  bool BeginValue();
  void Fail(absl::string_view why);
  void WriteEscaped(absl::string_view text);
  void MaybeFlush();

  std::string* out_;  // the string written to: the caller's, or buffer_
  std::string buffer_;
  std::FILE* file_ = nullptr;
  std::ostream* stream_ = nullptr;
  std::vector<Level> stack_;
  int64_t top_level_values_ = 0;
  std::string error_;  // first misuse; empty when none
  bool io_failed_ = false;
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_JSON_WRITER_H_
