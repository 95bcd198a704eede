#include "api/fingerprint.h"

#include <cstdio>

namespace sbx::api {

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h = (h ^ c) * 1099511628211ULL;
  }
  return h;
}

std::string Fingerprint(std::string_view bytes) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(Fnv1a64(bytes)));
  return out;
}

}  // namespace sbx::api
