// DependencyIndex: which objects depend on which (DESIGN §3 Dependencies), so that a change to
// a Sandbox enqueues the AgentWorkers that use it, and a change to a Workspace the Sandboxes
// that live in it.
//
// Purely in memory and rebuilt by the reconcilers as they run: every reconcile of a dependent
// declares what it currently uses (SetDependencies or Track) and a reconcile that finds its
// object gone calls Untrack. After a restart the index is empty until each object has been
// reconciled once, which the initial list does straight away. Thread-safe (one mutex).
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "api/resources.h"

namespace sbx::controller {

class DependencyIndex {
 public:
  using Key = api::ObjectKey;

  // Replaces everything `dependent` depends on with `dependencies`.
  void SetDependencies(const Key& dependent, const std::vector<Key>& dependencies);
  // Adds one edge: `dependent` uses `dependency`.
  void Track(const Key& dependent, const Key& dependency);
  // Removes every edge from `dependent` (it was deleted).
  void Untrack(const Key& dependent);

  // Direct dependents of `dependency`, sorted.
  std::vector<Key> DependentsOf(const Key& dependency) const;
  // Everything reachable through dependents, transitively (a Workspace → its Sandboxes → their
  // AgentWorkers), without `key` itself, sorted. Cycles are tolerated.
  std::vector<Key> TransitiveDependentsOf(const Key& key) const;
  std::vector<Key> DependenciesOf(const Key& dependent) const;
  // Number of edges.
  int size() const;

 private:
  mutable std::mutex mu_;
  std::map<Key, std::set<Key>> uses_;     // Guarded by mu_. dependent → dependencies
  std::map<Key, std::set<Key>> used_by_;  // Guarded by mu_. dependency → dependents
};

}  // namespace sbx::controller
