// Runs tests/tools/package_install.sh (the wheel and the .deb made, installed into fresh places
// and running the fake-driver demo through their own `gpuprio`) as a Catch2 test case, so its
// verdict counts in the test totals like every other test's.
#include <string>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

TEST_CASE("The wheel and the .deb install into fresh places and run the demo", "[tools]") {
  auto script = gpuprio_test::Runfile("tests/tools/package_install.sh");
  REQUIRE(script.ok());
  auto result = gpuprio_test::RunProcess({"/bin/bash", *script}, {});
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  CHECK(result->stdout_text.find("package install: all checks passed") != std::string::npos);
}

}  // namespace
