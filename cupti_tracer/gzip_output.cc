#include "cupti_tracer/gzip_output.h"

#include <zlib.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuprio::tracer {
namespace {

constexpr size_t kChunkBytes = 64 * 1024;
// windowBits 15 (the largest window) plus 16: a gzip header and trailer instead of zlib's.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kMemLevel = 8;  // zlib's default

// The cookie behind the FILE* handed to the caller: every byte written goes through deflate.
struct Deflater {
  z_stream stream{};
  std::FILE* out = nullptr;
  std::vector<unsigned char> chunk = std::vector<unsigned char>(kChunkBytes);
  std::string error;  // first failure; empty while all is well

  // Runs deflate with `flush` until it needs more input (or, for Z_FINISH, has ended the stream),
  // writing every full chunk to `out`.
  bool Pump(int flush) {
    for (;;) {
      stream.next_out = chunk.data();
      stream.avail_out = static_cast<uInt>(chunk.size());
      const int result = deflate(&stream, flush);
      if (result == Z_STREAM_ERROR) {
        error = "zlib deflate failed (stream error)";
        return false;
      }
      const size_t produced = chunk.size() - stream.avail_out;
      if (produced > 0 && std::fwrite(chunk.data(), 1, produced, out) != produced) {
        error = absl::StrCat("writing the compressed trace: ", std::strerror(errno));
        return false;
      }
      if (flush == Z_FINISH ? result == Z_STREAM_END : stream.avail_out != 0) return true;
    }
  }
};

ssize_t CookieWrite(void* cookie, const char* data, size_t size) {
  auto* d = static_cast<Deflater*>(cookie);
  if (!d->error.empty()) return -1;
  // deflate takes at most uInt bytes per call; stdio hands over at most its buffer at a time,
  // but a large fwrite may bypass the buffer.
  size_t done = 0;
  while (done < size) {
    const size_t n = std::min<size_t>(size - done, 1u << 30);
    d->stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data + done));
    d->stream.avail_in = static_cast<uInt>(n);
    const bool pumped = d->Pump(Z_NO_FLUSH);
    // `data` is stdio's or the caller's: never left pointed to after this call.
    d->stream.next_in = nullptr;
    d->stream.avail_in = 0;
    if (!pumped) return -1;
    done += n;
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

bool IsGzipTracePath(absl::string_view path) { return absl::EndsWith(path, ".gz"); }

absl::Status WriteGzipped(std::FILE* out, int level,
                          absl::FunctionRef<absl::Status(std::FILE*)> write) {
  Deflater d;
  d.out = out;
  if (deflateInit2(&d.stream, level, Z_DEFLATED, kGzipWindowBits, kMemLevel,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError(absl::StrCat("zlib deflateInit2 failed: ",
                                            d.stream.msg != nullptr ? d.stream.msg : "no memory"));
  }
  cookie_io_functions_t io{};
  io.write = &CookieWrite;
  std::FILE* plain = fopencookie(&d, "w", io);
  if (plain == nullptr) {
    deflateEnd(&d.stream);
    return absl::InternalError(absl::StrCat("fopencookie failed: ", std::strerror(errno)));
  }
  std::setvbuf(plain, nullptr, _IOFBF, kChunkBytes);
  absl::Status status = write(plain);
  if (!status.ok() && !d.error.empty()) {
    status = absl::Status(status.code(), absl::StrCat(status.message(), " (", d.error, ")"));
  }
  // fclose pushes stdio's buffer through CookieWrite; then the stream is ended. A write that
  // failed earlier (a large fwrite goes to CookieWrite directly, and a caller may not check it)
  // shows in d.error even when fclose has nothing left to flush.
  const bool closed = std::fclose(plain) == 0;
  if (status.ok() && (!closed || !d.error.empty())) {
    status = absl::DataLossError(d.error.empty() ? "writing the trace" : d.error);
  }
  if (status.ok() && !d.Pump(Z_FINISH)) status = absl::DataLossError(d.error);
  deflateEnd(&d.stream);
  return status;
}

}  // namespace gpuprio::tracer
