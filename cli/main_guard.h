// RunGuarded: what every sbx main does around its body. A library exception that escapes
// (nlohmann, yaml-cpp, std::) is a bug, but it must end the process with one line and a distinct
// exit code, not an abort (134) and a core dump. Header-only; for the three mains in cli/.
#pragma once

#include <exception>
#include <iostream>

namespace sbx::cli {

inline constexpr int kExitInternalError = 70;  // EX_SOFTWARE, sysexits.h

template <typename Body>
int RunGuarded(const char* program, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << program << ": internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << program << ": internal error: unknown exception\n";
  }
  return kExitInternalError;
}

}  // namespace sbx::cli
