#include "cli/commands/unified_diff.h"

#include <algorithm>
#include <vector>

namespace sbx::cli {
namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

struct Op {
  char tag;  // ' ', '-', '+'
  std::string_view line;
  int old_line;  // 1-based position in old (for ' ' and '-'), else the old line before it
  int new_line;  // likewise in new
};

std::vector<Op> EditScript(const std::vector<std::string_view>& a,
                           const std::vector<std::string_view>& b) {
  const size_t n = a.size();
  const size_t m = b.size();
  // lcs[i][j] = LCS length of a[i..] and b[j..].
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::vector<Op> ops;
  size_t i = 0;
  size_t j = 0;
  while (i < n || j < m) {
    const int oi = static_cast<int>(i);
    const int oj = static_cast<int>(j);
    if (i < n && j < m && a[i] == b[j]) {
      ops.push_back({' ', a[i], oi + 1, oj + 1});
      ++i;
      ++j;
    } else if (j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      // Prefer deletions first within a change block, as diff -u does.
      if (i < n && lcs[i + 1][j] == lcs[i][j + 1]) {
        ops.push_back({'-', a[i], oi + 1, oj});
        ++i;
      } else {
        ops.push_back({'+', b[j], oi, oj + 1});
        ++j;
      }
    } else {
      ops.push_back({'-', a[i], oi + 1, oj});
      ++i;
    }
  }
  return ops;
}

std::string Range(int start, int count) {
  // diff -u: a count of 1 is omitted; an empty range names the line before it.
  if (count == 1) {
    return std::to_string(start);
  }
  return std::to_string(start) + "," + std::to_string(count);
}

}  // namespace

std::string UnifiedDiff(std::string_view old_text, std::string_view new_text,
                        std::string_view old_label, std::string_view new_label, int context) {
  const std::vector<std::string_view> a = SplitLines(old_text);
  const std::vector<std::string_view> b = SplitLines(new_text);
  if (a == b) {
    return "";
  }
  const std::vector<Op> ops = EditScript(a, b);
  std::string out;
  out += "--- ";
  out += old_label;
  out += "\n+++ ";
  out += new_label;
  out += "\n";

  const int total = static_cast<int>(ops.size());
  int k = 0;
  while (k < total) {
    // Find the next change.
    while (k < total && ops[k].tag == ' ') {
      ++k;
    }
    if (k == total) {
      break;
    }
    int begin = std::max(0, k - context);
    // Extend the hunk while the next change is within 2*context unchanged lines.
    int end = k;  // exclusive end of the last change seen
    int scan = k;
    while (scan < total) {
      if (ops[scan].tag != ' ') {
        end = scan + 1;
        ++scan;
        continue;
      }
      int run = scan;
      while (run < total && ops[run].tag == ' ') {
        ++run;
      }
      if (run == total || run - scan > 2 * context) {
        break;
      }
      scan = run;
    }
    const int stop = std::min(total, end + context);

    int old_count = 0;
    int new_count = 0;
    for (int x = begin; x < stop; ++x) {
      old_count += ops[x].tag != '+' ? 1 : 0;
      new_count += ops[x].tag != '-' ? 1 : 0;
    }
    // First line numbers of the hunk: for an empty side, the line before it.
    int old_start = 0;
    int new_start = 0;
    {
      const Op& first = ops[begin];
      old_start = first.tag == '+' ? first.old_line + (old_count > 0 ? 1 : 0) : first.old_line;
      new_start = first.tag == '-' ? first.new_line + (new_count > 0 ? 1 : 0) : first.new_line;
    }
    out += "@@ -" + Range(old_start, old_count) + " +" + Range(new_start, new_count) + " @@\n";
    for (int x = begin; x < stop; ++x) {
      out += ops[x].tag;
      out += ops[x].line;
      out += "\n";
    }
    k = stop;
  }
  return out;
}

}  // namespace sbx::cli
