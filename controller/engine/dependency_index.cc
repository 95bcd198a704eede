#include "controller/engine/dependency_index.h"

#include <deque>

namespace sbx::controller {

void DependencyIndex::SetDependencies(const Key& dependent, const std::vector<Key>& dependencies) {
  std::lock_guard lock(mu_);
  auto& uses = uses_[dependent];
  for (const Key& old : uses) {
    auto it = used_by_.find(old);
    if (it != used_by_.end()) {
      it->second.erase(dependent);
      if (it->second.empty()) {
        used_by_.erase(it);
      }
    }
  }
  uses.clear();
  for (const Key& dep : dependencies) {
    uses.insert(dep);
    used_by_[dep].insert(dependent);
  }
  if (uses.empty()) {
    uses_.erase(dependent);
  }
}

void DependencyIndex::Track(const Key& dependent, const Key& dependency) {
  std::lock_guard lock(mu_);
  uses_[dependent].insert(dependency);
  used_by_[dependency].insert(dependent);
}

void DependencyIndex::Untrack(const Key& dependent) { SetDependencies(dependent, {}); }

std::vector<DependencyIndex::Key> DependencyIndex::DependentsOf(const Key& dependency) const {
  std::lock_guard lock(mu_);
  auto it = used_by_.find(dependency);
  if (it == used_by_.end()) {
    return {};
  }
  return {it->second.begin(), it->second.end()};
}

std::vector<DependencyIndex::Key> DependencyIndex::TransitiveDependentsOf(const Key& key) const {
  std::lock_guard lock(mu_);
  std::set<Key> seen{key};
  std::deque<Key> todo{key};
  while (!todo.empty()) {
    const Key k = std::move(todo.front());
    todo.pop_front();
    auto it = used_by_.find(k);
    if (it == used_by_.end()) {
      continue;
    }
    for (const Key& d : it->second) {
      if (seen.insert(d).second) {
        todo.push_back(d);
      }
    }
  }
  seen.erase(key);
  return {seen.begin(), seen.end()};
}

std::vector<DependencyIndex::Key> DependencyIndex::DependenciesOf(const Key& dependent) const {
  std::lock_guard lock(mu_);
  auto it = uses_.find(dependent);
  if (it == uses_.end()) {
    return {};
  }
  return {it->second.begin(), it->second.end()};
}

int DependencyIndex::size() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [k, deps] : uses_) {
    n += static_cast<int>(deps.size());
  }
  return n;
}

}  // namespace sbx::controller
