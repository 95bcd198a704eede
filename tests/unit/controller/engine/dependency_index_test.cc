#include "controller/engine/dependency_index.h"

#include <gtest/gtest.h>

namespace sbx::controller {
namespace {

using api::Kind;
using api::ObjectKey;
using Keys = std::vector<ObjectKey>;

ObjectKey Sb(const std::string& n) { return {Kind::kSandbox, "default", n}; }
ObjectKey Aw(const std::string& n) { return {Kind::kAgentWorker, "default", n}; }
ObjectKey Ws(const std::string& n) { return {Kind::kWorkspace, "default", n}; }

TEST(DependencyIndexTest, MapsASandboxToTheWorkersThatUseIt) {
  DependencyIndex index;
  index.Track(Aw("w1"), Sb("s"));
  index.Track(Aw("w2"), Sb("s"));
  index.Track(Aw("w3"), Sb("other"));
  EXPECT_EQ(index.DependentsOf(Sb("s")), (Keys{Aw("w1"), Aw("w2")}));
  EXPECT_EQ(index.DependentsOf(Sb("none")), Keys{});
  EXPECT_EQ(index.size(), 3);
}

TEST(DependencyIndexTest, SetDependenciesReplacesStaleEdges) {
  DependencyIndex index;
  index.Track(Aw("w"), Sb("old"));
  index.SetDependencies(Aw("w"), {Sb("new"), Ws("default")});
  EXPECT_EQ(index.DependentsOf(Sb("old")), Keys{});
  EXPECT_EQ(index.DependentsOf(Sb("new")), Keys{Aw("w")});
  EXPECT_EQ(index.DependenciesOf(Aw("w")), (Keys{Ws("default"), Sb("new")}));
}

TEST(DependencyIndexTest, UntrackRemovesEveryEdgeOfADeletedObject) {
  DependencyIndex index;
  index.Track(Aw("w"), Sb("s"));
  index.Track(Aw("w"), Ws("default"));
  index.Untrack(Aw("w"));
  EXPECT_EQ(index.DependentsOf(Sb("s")), Keys{});
  EXPECT_EQ(index.DependenciesOf(Aw("w")), Keys{});
  EXPECT_EQ(index.size(), 0);
}

TEST(DependencyIndexTest, TransitiveDependentsFollowChainsAndSurviveCycles) {
  DependencyIndex index;
  index.Track(Sb("s"), Ws("default"));
  index.Track(Aw("w"), Sb("s"));
  index.Track(Ws("default"), Aw("w"));  // a cycle must not loop forever
  EXPECT_EQ(index.TransitiveDependentsOf(Ws("default")), (Keys{Sb("s"), Aw("w")}));
}

}  // namespace
}  // namespace sbx::controller
