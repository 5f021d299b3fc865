#include "fake_redis/sha1.h"

#include <openssl/sha.h>

namespace turnstile::sim {

std::string sha1_hex(std::string_view bytes) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(2 * SHA_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA_DIGEST_LENGTH; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return hex;
}

std::string lower_case_sha(std::string_view sha1) {
  std::string lower(sha1);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

}  // namespace turnstile::sim
