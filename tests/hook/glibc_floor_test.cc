// The glibc floor of libgpuprio.so (docs/decisions/2026-11-27-glibc-floor.md): it needs no glibc
// symbol version above 2.28, and it loads and schedules under a real older glibc (Debian 11's 2.31,
// its own loader and libraries) — both through glibc_floor.sh. Also the pieces of
// hook/glibc_compat.cc that stand in for newer glibc: _dl_find_object's fallback against glibc's
// own, and the random source behind arc4random.
//
// A sanitizer build links against the host's glibc (its runtime needs it; such a library is never
// shipped), so the two floor checks warn SKIPPED there. Anywhere else a missing Debian 11 glibc is a
// failure: tools/setup.sh installs it.
#include <dlfcn.h>
#include <link.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "hook/glibc_compat.h"
#include "tests/runfiles.h"

namespace {

std::string Path(const char* runfile) {
  auto path = gpuprio_test::Runfile(runfile);
  REQUIRE(path.ok());
  return *path;
}

const char* Sanitizer() {
  const char* s = std::getenv("BUILD_SANITIZER");
  return s != nullptr && *s != '\0' ? s : nullptr;
}

gpuprio_test::ProcessResult Script(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/bash", Path("tests/hook/glibc_floor.sh")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = gpuprio_test::RunProcess(argv, {});
  REQUIRE(result.ok());
  return *result;
}

TEST_CASE("libgpuprio.so needs no glibc symbol version above GLIBC_2.28", "[hook][glibc_floor]") {
  if (Sanitizer() != nullptr) {
    WARN("SKIPPED: a " << Sanitizer() << " build links against the host's glibc; the floor is the "
                       << "shipped (plain, opt) library's");
    return;
  }
  const auto result = Script({"versions", Path("hook/libgpuprio.so"),
                              Path("tests/fake_cuda/glibc_floor/libcuda.so.1"),
                              Path("tests/hook/glibc_floor_probe")});
  INFO(result.stdout_text << result.stderr_text);
  CHECK(result.exit_code == 0);
  CHECK(result.stdout_text.find("glibc floor versions: ok") != std::string::npos);
}

TEST_CASE("The version check names each symbol above the floor", "[hook][glibc_floor]") {
  // This test binary is linked against Debian 12's glibc as usual: __libc_start_main@GLIBC_2.34.
  const auto result = Script({"versions", "/proc/self/exe"});
  INFO(result.stdout_text << result.stderr_text);
  CHECK(result.exit_code == 1);
  CHECK(result.stdout_text.find("GLIBC_2.34 __libc_start_main") != std::string::npos);
  CHECK(result.stdout_text.find("glibc floor versions: 1 check(s) failed") != std::string::npos);
}

TEST_CASE("Under Debian 11's glibc 2.31, a CUDA program runs with libgpuprio.so preloaded and its "
          "launches go through the scheduler", "[hook][glibc_floor]") {
  if (Sanitizer() != nullptr) {
    WARN("SKIPPED: a " << Sanitizer() << " build's runtime needs the host's glibc");
    return;
  }
  const auto result = Script({"run"});
  INFO(result.stdout_text << result.stderr_text);
  CHECK(result.exit_code == 0);
  CHECK(result.stdout_text.find("glibc floor run: ok") != std::string::npos);
}

int NoteDlopen() { return 1; }

TEST_CASE("_dl_find_object's fallback finds what glibc's own finds", "[hook][glibc_floor]") {
  using FindObject = int (*)(void*, struct dl_find_object*);
  auto real = reinterpret_cast<FindObject>(dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35"));
  REQUIRE(real != nullptr);  // this test runs on Debian 12's glibc 2.36
  // This program (code and data), libc, libm and the loader; then addresses nothing maps.
  std::vector<void*> addresses = {reinterpret_cast<void*>(&NoteDlopen),
                                  reinterpret_cast<void*>(&std::malloc),
                                  reinterpret_cast<void*>(&memcpy)};
  void* libm = dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (libm == nullptr) libm = dlopen("libm.so.6", RTLD_NOW);
  REQUIRE(libm != nullptr);
  addresses.push_back(dlsym(libm, "cos"));
  addresses.push_back(dlsym(RTLD_DEFAULT, "_dl_find_object"));
  static const int kData = 7;
  // glibc's handle of the main program is its link map.
  auto* main_program = static_cast<struct link_map*>(dlopen(nullptr, RTLD_NOW));
  REQUIRE(main_program != nullptr);
  addresses.push_back(const_cast<int*>(&kData));
  for (void* address : addresses) {
    INFO("address " << address);
    REQUIRE(address != nullptr);
    struct dl_find_object want, got;
    std::memset(&want, 0, sizeof(want));
    std::memset(&got, 0xab, sizeof(got));
    REQUIRE(real(address, &want) == 0);
    REQUIRE(gpuprio::glibc_compat::FindObjectFallback(address, &got) == 0);
    CHECK(got.dlfo_flags == want.dlfo_flags);
    CHECK(got.dlfo_map_start == want.dlfo_map_start);
    if (want.dlfo_link_map == main_program) {
      // glibc 2.36 reports less for the main program: the end of its first PT_LOAD segment.
      CHECK(got.dlfo_map_end >= want.dlfo_map_end);
    } else {
      CHECK(got.dlfo_map_end == want.dlfo_map_end);
    }
    CHECK(got.dlfo_link_map == want.dlfo_link_map);
    CHECK(got.dlfo_eh_frame == want.dlfo_eh_frame);
    CHECK(got.dlfo_eh_frame != nullptr);
  }
  struct dl_find_object unused;
  for (uintptr_t unmapped : {uintptr_t{16}, uintptr_t{1} << 46}) {
    void* address = reinterpret_cast<void*>(unmapped);
    CHECK(real(address, &unused) == -1);
    CHECK(gpuprio::glibc_compat::FindObjectFallback(address, &unused) == -1);
  }
}

TEST_CASE("The random source behind arc4random fills every byte", "[hook][glibc_floor]") {
  // 64 bytes twice: equal by chance with probability 2^-512.
  unsigned char a[64], b[64];
  std::memset(a, 0, sizeof(a));
  std::memset(b, 0, sizeof(b));
  REQUIRE(gpuprio::glibc_compat::FillRandom(a, sizeof(a)));
  REQUIRE(gpuprio::glibc_compat::FillRandom(b, sizeof(b)));
  CHECK(std::memcmp(a, b, sizeof(a)) != 0);
  // A request larger than one getrandom call returns at once (256 bytes are always whole).
  std::vector<unsigned char> big(1 << 20, 0);
  REQUIRE(gpuprio::glibc_compat::FillRandom(big.data(), big.size()));
  size_t zeros = 0;
  for (unsigned char c : big) zeros += c == 0;
  CHECK(zeros < big.size() / 128);  // about 1/256 of the bytes are 0
}

TEST_CASE("log2 bound to GLIBC_2.2.5 returns what glibc's current log2 does", "[hook][glibc_floor]") {
  // This test links hook/glibc_compat.cc as the library does: its log2 calls log2@GLIBC_2.2.5.
  using Log2 = double (*)(double);
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  REQUIRE(libm != nullptr);
  auto current = reinterpret_cast<Log2>(dlvsym(libm, "log2", "GLIBC_2.29"));
  REQUIRE(current != nullptr);
  const Log2 ours = &log2;
  for (volatile double x : {1.0, 2.0, 3.0, 0.75, 1e-300, 1e300, 12345.678, 0.0, -1.0}) {
    const double a = ours(x), b = current(x);
    INFO("x=" << x << " ours=" << a << " glibc's=" << b);
    CHECK((a == b || (std::isnan(a) && std::isnan(b))));
  }
}

}  // namespace
