// UnifiedDiff: a line-based unified diff (as `diff -u`) of two texts, for `sbxctl diff`.
//
// A longest-common-subsequence over lines; fine for objects of a few hundred lines (O(n·m)
// time and memory). Stateless; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace sbx::cli {

// Returns "" when the texts are equal, else "--- <old_label>\n+++ <new_label>\n" followed by
// hunks "@@ -l,s +l,s @@" with `context` unchanged lines around each change. A missing final
// newline is ignored.
std::string UnifiedDiff(std::string_view old_text, std::string_view new_text,
                        std::string_view old_label, std::string_view new_label, int context = 3);

}  // namespace sbx::cli
