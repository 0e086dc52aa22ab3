// BootIdFromProc takes only a kernel-formatted UUID; HostName is this machine's name.
#include "cupti_tracer/machine_identity.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "catch2/catch.hpp"
#include "tests/test_directory.h"

namespace gpuprio::tracer {
namespace {

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("BootIdFromProc reads a UUID and refuses anything else", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("boot_id");
  const std::string id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  CHECK(BootIdFromProc(WriteFile(dir, "good", id + "\n").c_str()) == id);
  CHECK(BootIdFromProc(WriteFile(dir, "no_newline", id).c_str()) == id);
  CHECK(BootIdFromProc(WriteFile(dir, "upper", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0\n").c_str())
            .empty());
  CHECK(BootIdFromProc(WriteFile(dir, "short", "0f1e2d3c\n").c_str()).empty());
  CHECK(BootIdFromProc(WriteFile(dir, "dashes", "0f1e2d3c04b5a-6978-8796-a5b4c3d2e1f0\n").c_str())
            .empty());
  CHECK(BootIdFromProc(WriteFile(dir, "quote", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f\"\n").c_str())
            .empty());
  CHECK(BootIdFromProc(WriteFile(dir, "empty", "").c_str()).empty());
  CHECK(BootIdFromProc((dir + "/missing").c_str()).empty());
}

TEST_CASE("The real boot id and host name are read", "[tracer]") {
  std::ifstream proc("/proc/sys/kernel/random/boot_id");
  std::string expected;
  if (proc && std::getline(proc, expected)) CHECK(BootIdFromProc() == expected);
  char name[256] = {};
  REQUIRE(gethostname(name, sizeof(name) - 1) == 0);
  CHECK(HostName() == name);
}

}  // namespace
}  // namespace gpuprio::tracer
