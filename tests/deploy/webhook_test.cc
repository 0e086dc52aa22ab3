// Runs tests/deploy/webhook_test.py (deploy/kubernetes: the admission webhook over HTTPS with
// certificates from gen_certs.sh, its JSONPatches applied and checked, and the manifests parsed
// and cross-checked) as a Catch2 test case, so its verdict counts in the test totals.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

std::string RunfileOrFail(const std::string& path) {
  auto found = gpuprio_test::Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

TEST_CASE("The Kubernetes admission webhook, gen_certs.sh and the manifests", "[deploy]") {
  const std::string webhook = RunfileOrFail("deploy/kubernetes/webhook/gpuprio_webhook.py");
  // deploy/ in the runfiles: three levels up from deploy/kubernetes/webhook/gpuprio_webhook.py.
  const std::string deploy =
      gpuprio_test::Dirname(gpuprio_test::Dirname(gpuprio_test::Dirname(webhook)));
  // -I: ignore PYTHON* variables and user site-packages; -S: standard library only; -B: no .pyc.
  const std::vector<std::string> argv = {"/usr/bin/env", "python3", "-I", "-S", "-B",
                                         RunfileOrFail("tests/deploy/webhook_test.py")};
  auto result = gpuprio_test::RunProcess(argv, {{"GPUPRIO_DEPLOY_DIR", deploy}});
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  // unittest's own verdict: every test ran and passed, none skipped.
  CHECK(result->stderr_text.find("\nOK") != std::string::npos);
  CHECK(result->stderr_text.find("skipped") == std::string::npos);
}

}  // namespace
