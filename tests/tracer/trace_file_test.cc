// Tests of cupti_tracer/trace_file and of WriteChromeTrace through it: the trace never goes
// through a link or over anything but a regular file, keeps an existing file's mode, and leaves
// neither a temporary nor a changed target behind when something fails.
#include "cupti_tracer/trace_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cupti_tracer/chrome_trace_writer.h"
#include "nlohmann/json.hpp"
#include "tests/test_directory.h"
#include "tests/tracer/synthetic_trace.h"

namespace gpuprio::tracer {
namespace {

std::string Contents(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void WriteText(const std::string& path, const std::string& text, mode_t mode) {
  { std::ofstream(path) << text; }
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode;
}

bool Mentions(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST_CASE("A link planted where a trace's temporary used to be is never followed", "[tracer]") {
  // The temporary's name was `<path>.tmp.<pid>`: anyone could plant a link there and have the
  // trace overwrite a file the link points at.
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const std::string victim = dir + "/private";
  WriteText(victim, "secret", 0600);
  const std::string path = dir + "/trace.json";
  REQUIRE(symlink(victim.c_str(), (path + ".tmp." + std::to_string(getpid())).c_str()) == 0);

  const TraceInput input = gpuprio_test::Scenario();
  REQUIRE(WriteChromeTrace(input, path).ok());
  CHECK(Contents(victim) == "secret");
  CHECK((ModeOf(victim) & 0777) == 0600);
  CHECK(S_ISREG(ModeOf(path)));
  CHECK(Contents(path) == ChromeTraceJson(input));
}

TEST_CASE("A trace path that is not a regular file is refused and left as it was", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const std::string path = dir + "/trace.json";
  const TraceInput input = gpuprio_test::Scenario();

  SECTION("a symbolic link: neither the link nor its target changes") {
    const std::string target = dir + "/target";
    WriteText(target, "kept", 0644);
    REQUIRE(symlink(target.c_str(), path.c_str()) == 0);
    const absl::Status status = WriteChromeTrace(input, path);
    CHECK_FALSE(status.ok());
    CHECK(Mentions(status, "is a symbolic link"));
    CHECK(S_ISLNK(ModeOf(path)));
    CHECK(Contents(target) == "kept");
    CHECK(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{"target", "trace.json"});
  }
  SECTION("a FIFO (as /dev/null is a device): it stays a FIFO") {
    REQUIRE(mkfifo(path.c_str(), 0600) == 0);
    const absl::Status status = WriteChromeTrace(input, path);
    CHECK_FALSE(status.ok());
    CHECK(Mentions(status, "is a FIFO"));
    CHECK(S_ISFIFO(ModeOf(path)));
    CHECK(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{"trace.json"});
  }
  SECTION("a directory") {
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    const absl::Status status = WriteChromeTrace(input, path);
    CHECK_FALSE(status.ok());
    CHECK(Mentions(status, "is a directory"));
    CHECK(S_ISDIR(ModeOf(path)));
  }
  SECTION("CheckTraceFileTarget says the same before anything is recorded") {
    REQUIRE(mkfifo(path.c_str(), 0600) == 0);
    CHECK(Mentions(CheckTraceFileTarget(path), "is a FIFO"));
    CHECK(CheckTraceFileTarget(dir + "/new.json").ok());
    CHECK(Mentions(CheckTraceFileTarget(dir + "/missing/trace.json"), dir + "/missing"));
    CHECK(Mentions(CheckTraceFileTarget("/dev/null"), "is a character device"));
  }
}

TEST_CASE("A symbolic link anywhere in a trace path is refused, not followed", "[tracer]") {
  // GPUPRIO_TRACE comes from the environment and the process writing it may be privileged: a
  // directory link someone else can plant (in /tmp, in a shared directory) would send the trace,
  // and its rename over an existing file, anywhere the link points.
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const std::string elsewhere = dir + "/elsewhere";
  REQUIRE(mkdir(elsewhere.c_str(), 0700) == 0);
  REQUIRE(mkdir((elsewhere + "/sub").c_str(), 0700) == 0);
  WriteText(elsewhere + "/trace.json", "kept", 0644);
  WriteText(elsewhere + "/sub/trace.json", "kept", 0644);
  REQUIRE(symlink(elsewhere.c_str(), (dir + "/link").c_str()) == 0);
  const TraceInput input = gpuprio_test::Scenario();

  for (const std::string& path : {dir + "/link/trace.json", dir + "/link/sub/trace.json",
                                  dir + "/link/new.json", dir + "/./link/../link/trace.json"}) {
    INFO(path);
    const absl::Status check = CheckTraceFileTarget(path);
    CHECK_FALSE(check.ok());
    CHECK(Mentions(check, "/link is a symbolic link"));
    CHECK(Mentions(check, elsewhere));  // says where it points, so the user can give that
    const absl::Status status = WriteChromeTrace(input, path);
    CHECK_FALSE(status.ok());
    CHECK(Mentions(status, "is a symbolic link"));
  }
  CHECK(Contents(elsewhere + "/trace.json") == "kept");
  CHECK(Contents(elsewhere + "/sub/trace.json") == "kept");
  CHECK(gpuprio_test::DirectoryEntries(elsewhere) == std::vector<std::string>{"sub", "trace.json"});
  // The same directories named without the link are fine.
  CHECK(WriteChromeTrace(input, elsewhere + "/sub/trace.json").ok());
  CHECK(WriteChromeTrace(input, dir + "/./elsewhere//sub/../trace.json").ok());
  CHECK(Contents(elsewhere + "/trace.json") == ChromeTraceJson(input));
}

TEST_CASE("A directory swapped for a link while the trace is written does not redirect it",
          "[tracer]") {
  // The directory is opened once, when the write starts; the temporary is created and renamed
  // inside that directory, whatever its name leads to by then.
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const std::string out = dir + "/out";
  const std::string elsewhere = dir + "/elsewhere";
  REQUIRE(mkdir(out.c_str(), 0700) == 0);
  REQUIRE(mkdir(elsewhere.c_str(), 0700) == 0);
  WriteText(elsewhere + "/trace.json", "kept", 0644);
  const absl::Status status = WriteFileReplacing(out + "/trace.json", [&](std::FILE* file) {
    std::fputs("{}", file);
    if (rename(out.c_str(), (dir + "/moved").c_str()) != 0 ||
        symlink(elsewhere.c_str(), out.c_str()) != 0) {
      return absl::InternalError("could not swap the directory");
    }
    return absl::OkStatus();
  });
  REQUIRE(status.ok());
  CHECK(Contents(elsewhere + "/trace.json") == "kept");
  CHECK(gpuprio_test::DirectoryEntries(elsewhere) == std::vector<std::string>{"trace.json"});
  CHECK(Contents(dir + "/moved/trace.json") == "{}");
}

TEST_CASE("An existing trace file keeps its mode; a new one gets 0644 minus the umask",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const TraceInput input = gpuprio_test::Scenario();
  const mode_t old_umask = umask(002);
  const std::string kept = dir + "/kept.json";
  WriteText(kept, "old trace", 0600);
  const std::string fresh = dir + "/fresh.json";
  const absl::Status kept_status = WriteChromeTrace(input, kept);
  const absl::Status fresh_status = WriteChromeTrace(input, fresh);
  umask(old_umask);
  REQUIRE(kept_status.ok());
  REQUIRE(fresh_status.ok());
  CHECK((ModeOf(kept) & 07777) == 0600);
  CHECK((ModeOf(fresh) & 07777) == (0644 & ~002));
  CHECK(Contents(kept) == ChromeTraceJson(input));
}

TEST_CASE("A write that fails leaves the old trace and no temporary", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const std::string path = dir + "/trace.json";
  const std::string old_trace = ChromeTraceJson(TraceInput{});
  WriteText(path, old_trace, 0644);

  SECTION("the writer reports an error halfway") {
    const absl::Status status = WriteFileReplacing(path, [](std::FILE* file) {
      std::fputs("{\"traceEvents\": [", file);
      return absl::DataLossError("disk full");
    });
    CHECK_FALSE(status.ok());
    CHECK(Mentions(status, "disk full"));
  }
  SECTION("the temporary is removed under the writer (a signal that ends the process)") {
    std::vector<std::string> during;
    const absl::Status status = WriteFileReplacing(path, [&](std::FILE* file) {
      std::fputs("{}", file);
      RemovePendingTemporary();
      during = gpuprio_test::DirectoryEntries(dir);
      return absl::OkStatus();
    });
    CHECK_FALSE(status.ok());
    CHECK(during == std::vector<std::string>{"trace.json"});
  }
  CHECK(Contents(path) == old_trace);
  CHECK(nlohmann::json::parse(Contents(path)).is_object());
  CHECK(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("The temporary is private, hidden and beside the trace while it is written",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("trace_file");
  const std::string path = dir + "/trace.json";
  WriteText(path, "old", 0640);
  std::vector<std::string> during;
  mode_t temporary_mode = 0;
  REQUIRE(WriteFileReplacing(path, [&](std::FILE* file) {
            during = gpuprio_test::DirectoryEntries(dir);
            struct stat st;
            if (fstat(fileno(file), &st) == 0) temporary_mode = st.st_mode & 07777;
            std::fputs("{}", file);
            return absl::OkStatus();
          }).ok());
  REQUIRE(during.size() == 2);
  CHECK(during[0].rfind(".trace.json.gpuprio-", 0) == 0);
  CHECK(temporary_mode == 0600);
  CHECK(Contents(path) == "{}");
  CHECK((ModeOf(path) & 07777) == 0640);
}

}  // namespace
}  // namespace gpuprio::tracer
