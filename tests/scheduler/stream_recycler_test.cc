// StreamRecycler without a dispatcher: released streams are taken once, the ones still
// referenced wait for a later round, and the ones let go of come back for reuse.
#include "scheduler/stream_recycler.h"

#include <vector>

#include "catch2/catch.hpp"

namespace {

using gpuprio::scheduler::StreamRecycler;
using gpuprio::scheduler::StreamState;

TEST_CASE("StreamRecycler: released, collected, kept or handed back for reuse") {
  StreamRecycler recycler;
  StreamState a;
  StreamState b;
  CHECK_FALSE(recycler.HasReleased());
  CHECK(recycler.TakeRecycled() == nullptr);

  recycler.Release(&a);
  recycler.Release(&b);
  CHECK(recycler.HasReleased());
  const std::vector<StreamState*> released = recycler.TakeReleased();
  CHECK(released == std::vector<StreamState*>{&a, &b});
  CHECK_FALSE(recycler.HasReleased());
  CHECK(recycler.TakeRecycled() == nullptr);  // not let go of yet

  // `b` is still referenced (ops submitted after its destroy began): it waits again.
  recycler.Return({&b}, {&a});
  CHECK(recycler.HasReleased());
  CHECK(recycler.TakeRecycled() == &a);
  CHECK(recycler.TakeRecycled() == nullptr);

  CHECK(recycler.TakeReleased() == std::vector<StreamState*>{&b});
  recycler.Return({}, {&b});
  CHECK_FALSE(recycler.HasReleased());
  CHECK(recycler.TakeRecycled() == &b);
}

}  // namespace
