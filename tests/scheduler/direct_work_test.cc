// DirectWorkList without a dispatcher: a stream listed once however often its client issues on
// it, adopted with the highest priority that issued there, listed again by work issued after its
// adoption, the issues in progress counted, and clients listing from several threads at once.
#include "scheduler/direct_work.h"

#include <thread>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"

namespace {

using gpuprio::scheduler::DirectWorkList;
using gpuprio::scheduler::StreamState;

std::vector<std::pair<StreamState*, int>> AdoptAll(DirectWorkList& list) {
  std::vector<std::pair<StreamState*, int>> adopted;
  list.Adopt([&](StreamState* s, int priority) {
    CHECK_FALSE(s->direct_unmarked.load());  // unlisted before it is adopted
    adopted.emplace_back(s, priority);
  });
  return adopted;
}

TEST_CASE("DirectWorkList: listed once, adopted at its highest priority, listed again after") {
  DirectWorkList list;
  StreamState a;
  StreamState b;
  CHECK_FALSE(list.Listed());
  CHECK(AdoptAll(list).empty());

  CHECK(list.List(&a, 2));
  CHECK_FALSE(list.List(&a, 5));  // listed already: only its priority is raised
  CHECK_FALSE(list.List(&a, 1));
  CHECK(list.List(&b, -3));
  CHECK(list.Listed());
  const auto adopted = AdoptAll(list);
  REQUIRE(adopted.size() == 2);
  CHECK(adopted[0] == std::make_pair(&b, -3));  // a stack: the latest listed first
  CHECK(adopted[1] == std::make_pair(&a, 5));
  CHECK_FALSE(list.Listed());
  CHECK(AdoptAll(list).empty());

  // Work issued after the adoption (and its mark) is listed again.
  CHECK(list.List(&a, 0));
  const auto again = AdoptAll(list);
  REQUIRE(again.size() == 1);
  CHECK(again[0] == std::make_pair(&a, 5));  // the highest that ever issued there
}

TEST_CASE("DirectWorkList: issues in progress until they end") {
  DirectWorkList list;
  CHECK_FALSE(list.IssuesInProgress());
  list.BeginIssue();
  list.BeginIssue();
  CHECK(list.IssuesInProgress());
  list.EndIssue();
  CHECK(list.IssuesInProgress());
  list.EndIssue();
  CHECK_FALSE(list.IssuesInProgress());
}

TEST_CASE("DirectWorkList: clients list from several threads while the dispatcher adopts") {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  DirectWorkList list;
  std::vector<StreamState> streams(kThreads);
  std::vector<int> adoptions(kThreads, 0);
  std::vector<int> listings(kThreads, 0);
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        if (list.List(&streams[t], t)) ++listings[t];
      }
    });
  }
  const auto adopt = [&] {
    list.Adopt([&](StreamState* s, int priority) {
      CHECK(priority == s - streams.data());
      ++adoptions[priority];
    });
  };
  for (int i = 0; i < 1000; ++i) adopt();
  for (std::thread& c : clients) c.join();
  adopt();
  CHECK_FALSE(list.Listed());
  // Every listing was adopted exactly once.
  CHECK(adoptions == listings);
}

}  // namespace
