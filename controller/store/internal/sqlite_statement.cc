#include "controller/store/internal/sqlite_statement.h"

namespace sbx::controller::store_internal {

// A short, single-line description of a statement for error messages.
std::string Describe(std::string_view sql) {
  std::string out;
  for (char c : sql) {
    if (out.size() >= 48) {
      out += "…";
      break;
    }
    if (c == '\n' || c == '\t' || c == ' ') {
      if (!out.empty() && out.back() != ' ') {
        out.push_back(' ');
      }
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace sbx::controller::store_internal
