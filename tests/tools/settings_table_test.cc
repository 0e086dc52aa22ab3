// Runs tests/tools/settings_table_test.py (docs/user_guide.md's variable tables are the ones
// tools/settings/settings_table.py makes from scheduler/base/env_vars.def) as a Catch2 test case,
// so its verdict counts in the test totals like every other test's.
#include "catch2/catch.hpp"
#include "tests/python_unittest.h"

namespace {

using gpuprio_test::RunfileOrFail;

TEST_CASE("The user guide's variable tables are generated from env_vars.def", "[docs][config]") {
  gpuprio_test::CheckPythonUnittest({RunfileOrFail("tests/tools/settings_table_test.py"),
                                     RunfileOrFail("tools/settings/settings_table.py"),
                                     RunfileOrFail("scheduler/base/env_vars.def"),
                                     RunfileOrFail("docs/user_guide.md")},
                                    {});
}

}  // namespace
