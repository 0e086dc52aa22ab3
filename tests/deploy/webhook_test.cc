// Runs tests/deploy/webhook_test.py (deploy/kubernetes: the admission webhook over HTTPS with
// certificates from gen_certs.sh, its JSONPatches applied and checked, and the manifests parsed
// and cross-checked) as a Catch2 test case, so its verdict counts in the test totals.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/python_unittest.h"

namespace {

using gpuprio_test::RunfileOrFail;

TEST_CASE("The Kubernetes admission webhook, gen_certs.sh and the manifests", "[deploy]") {
  const std::string webhook = RunfileOrFail("deploy/kubernetes/webhook/gpuprio_webhook.py");
  // deploy/ in the runfiles: three levels up from deploy/kubernetes/webhook/gpuprio_webhook.py.
  const std::string deploy =
      gpuprio_test::Dirname(gpuprio_test::Dirname(gpuprio_test::Dirname(webhook)));
  gpuprio_test::CheckPythonUnittest({RunfileOrFail("tests/deploy/webhook_test.py")},
                                    {{"GPUPRIO_DEPLOY_DIR", deploy}});
}

}  // namespace
