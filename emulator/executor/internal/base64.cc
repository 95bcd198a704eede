#include "emulator/executor/internal/base64.h"

#include <array>

namespace sbx::emulator::internal::executor {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int, 256> DecodeTable() {
  std::array<int, 256> t{};
  for (int& v : t) {
    v = -1;
  }
  for (int i = 0; i < 64; ++i) {
    t[static_cast<unsigned char>(kAlphabet[i])] = i;
  }
  return t;
}

}  // namespace

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  unsigned val = 0;
  int bits = -6;
  for (unsigned char c : in) {
    val = ((val << 8) | c) & 0xFFFFFF;  // only the bits not yet written matter
    bits += 8;
    while (bits >= 0) {
      out += kAlphabet[(val >> bits) & 0x3F];
      bits -= 6;
    }
  }
  if (bits > -6) {
    out += kAlphabet[((val << 8) >> (bits + 8)) & 0x3F];
  }
  while (out.size() % 4) {
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(const std::string& in) {
  static constexpr std::array<int, 256> kTable = DecodeTable();
  if (in.size() % 4 != 0) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(in.size() / 4 * 3);
  unsigned val = 0;
  int bits = -8;
  size_t padding = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    if (c == '=') {
      if (i + 2 < in.size()) {
        return std::nullopt;  // padding only at the end
      }
      ++padding;
      continue;
    }
    if (padding > 0 || kTable[c] < 0) {
      return std::nullopt;
    }
    val = ((val << 6) | static_cast<unsigned>(kTable[c])) & 0xFFFFFF;
    bits += 6;
    if (bits >= 0) {
      out += static_cast<char>((val >> bits) & 0xFFu);
      bits -= 8;
    }
  }
  return out;
}

}  // namespace sbx::emulator::internal::executor
