// Grisu2 as Redis 7.2's deps/fpconv runs it, written from Loitsch's paper
// ("Printing Floating-Point Numbers Quickly and Accurately with
// Integers", 2010) and checked against redis-server 7.2.6 by the
// differential test: the same cached powers, the same rounding of the
// products and of the last digit, so the same digits.

#include "fake_redis/double_text.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "core/check.h"
#include "fake_redis/command_args.h"

namespace turnstile::sim {
namespace {

// A number frac * 2^exp ("do-it-yourself floating point").
struct DiyFp {
  std::uint64_t frac = 0;
  int exp = 0;
};

constexpr int kSignificandBits = 52;
constexpr std::uint64_t kHiddenBit = std::uint64_t{1} << kSignificandBits;
constexpr std::uint64_t kFractionMask = kHiddenBit - 1;
constexpr int kExponentMask = 0x7ff;
constexpr int kExponentBias = 1023 + kSignificandBits;

// 10^k for k = kFirstCachedPower + kCachedPowerStep * i, the 64-bit
// significand rounded to nearest: computed exactly (Python's Fraction),
// the table every Grisu implementation uses.
constexpr int kFirstCachedPower = -348;
constexpr int kCachedPowerStep = 8;
constexpr std::array<DiyFp, 87> kCachedPowers{
    {{0xfa8fd5a0081c0288, -1220}, {0xbaaee17fa23ebf76, -1193}, {0x8b16fb203055ac76, -1166}, {0xcf42894a5dce35ea, -1140},
     {0x9a6bb0aa55653b2d, -1113}, {0xe61acf033d1a45df, -1087}, {0xab70fe17c79ac6ca, -1060}, {0xff77b1fcbebcdc4f, -1034},
     {0xbe5691ef416bd60c, -1007}, {0x8dd01fad907ffc3c, -980},  {0xd3515c2831559a83, -954},  {0x9d71ac8fada6c9b5, -927},
     {0xea9c227723ee8bcb, -901},  {0xaecc49914078536d, -874},  {0x823c12795db6ce57, -847},  {0xc21094364dfb5637, -821},
     {0x9096ea6f3848984f, -794},  {0xd77485cb25823ac7, -768},  {0xa086cfcd97bf97f4, -741},  {0xef340a98172aace5, -715},
     {0xb23867fb2a35b28e, -688},  {0x84c8d4dfd2c63f3b, -661},  {0xc5dd44271ad3cdba, -635},  {0x936b9fcebb25c996, -608},
     {0xdbac6c247d62a584, -582},  {0xa3ab66580d5fdaf6, -555},  {0xf3e2f893dec3f126, -529},  {0xb5b5ada8aaff80b8, -502},
     {0x87625f056c7c4a8b, -475},  {0xc9bcff6034c13053, -449},  {0x964e858c91ba2655, -422},  {0xdff9772470297ebd, -396},
     {0xa6dfbd9fb8e5b88f, -369},  {0xf8a95fcf88747d94, -343},  {0xb94470938fa89bcf, -316},  {0x8a08f0f8bf0f156b, -289},
     {0xcdb02555653131b6, -263},  {0x993fe2c6d07b7fac, -236},  {0xe45c10c42a2b3b06, -210},  {0xaa242499697392d3, -183},
     {0xfd87b5f28300ca0e, -157},  {0xbce5086492111aeb, -130},  {0x8cbccc096f5088cc, -103},  {0xd1b71758e219652c, -77},
     {0x9c40000000000000, -50},   {0xe8d4a51000000000, -24},   {0xad78ebc5ac620000, 3},     {0x813f3978f8940984, 30},
     {0xc097ce7bc90715b3, 56},    {0x8f7e32ce7bea5c70, 83},    {0xd5d238a4abe98068, 109},   {0x9f4f2726179a2245, 136},
     {0xed63a231d4c4fb27, 162},   {0xb0de65388cc8ada8, 189},   {0x83c7088e1aab65db, 216},   {0xc45d1df942711d9a, 242},
     {0x924d692ca61be758, 269},   {0xda01ee641a708dea, 295},   {0xa26da3999aef774a, 322},   {0xf209787bb47d6b85, 348},
     {0xb454e4a179dd1877, 375},   {0x865b86925b9bc5c2, 402},   {0xc83553c5c8965d3d, 428},   {0x952ab45cfa97a0b3, 455},
     {0xde469fbd99a05fe3, 481},   {0xa59bc234db398c25, 508},   {0xf6c69a72a3989f5c, 534},   {0xb7dcbf5354e9bece, 561},
     {0x88fcf317f22241e2, 588},   {0xcc20ce9bd35c78a5, 614},   {0x98165af37b2153df, 641},   {0xe2a0b5dc971f303a, 667},
     {0xa8d9d1535ce3b396, 694},   {0xfb9b7cd9a4a7443c, 720},   {0xbb764c4ca7a44410, 747},   {0x8bab8eefb6409c1a, 774},
     {0xd01fef10a657842c, 800},   {0x9b10a4e5e9913129, 827},   {0xe7109bfba19c0c9d, 853},   {0xac2820d9623bf429, 880},
     {0x80444b5e7aa7cf85, 907},   {0xbf21e44003acdd2d, 933},   {0x8e679c2f5e44ff8f, 960},   {0xd433179d9c8cb841, 986},
     {0x9e19db92b4e31ba9, 1013},  {0xeb96bf6ebadf77d9, 1039},  {0xaf87023b9bf0ee6b, 1066}}};

// The cached power is chosen so the scaled upper boundary's exponent falls
// in [kMinScaledExp, kMaxScaledExp], searched from fpconv's first guess.
constexpr int kMinScaledExp = -60;
constexpr int kMaxScaledExp = -32;
constexpr double kLog10Of2 = 0.30102999566398114;
constexpr int kCachedPowerCount = static_cast<int>(kCachedPowers.size());

// Up to 10^19, for the digit loops.
constexpr std::array<std::uint64_t, 20> kPowersOfTen = [] {
  std::array<std::uint64_t, 20> powers{};
  powers[0] = 1;
  for (std::size_t i = 1; i < powers.size(); ++i) powers[i] = powers[i - 1] * 10;
  return powers;
}();

// Digits of the integer part tried first: at most 10 (below 2^32).
constexpr int kIntegerDigits = 10;
// The largest magnitude Redis 7.2 prints as an integer (double2ll:
// LLONG_MAX / 2 as a double, 2^62).
constexpr double kMaxPlainInteger = static_cast<double>(std::numeric_limits<std::int64_t>::max() / 2);
// fpconv_dtoa writes the digits without an exponent while the exponent is
// below the digits + kPlainIntegerSlack (integers), or above
// kSmallFractionExponent or below kPlainFractionDigits (fractions).
constexpr int kPlainIntegerSlack = 7;
constexpr int kSmallFractionExponent = -7;
constexpr int kPlainFractionDigits = 4;
// With an exponent, at most this many digits (less one for a minus sign).
constexpr int kMaxExponentDigits = 18;

// The upper 64 bits of a * b, rounded half up, from 32-bit halves.
DiyFp multiply(DiyFp a, DiyFp b) {
  constexpr int kHalf = 32;
  constexpr std::uint64_t kLow = 0xffffffff;
  const std::uint64_t high_high = (a.frac >> kHalf) * (b.frac >> kHalf);
  const std::uint64_t high_low = (a.frac >> kHalf) * (b.frac & kLow);
  const std::uint64_t low_high = (a.frac & kLow) * (b.frac >> kHalf);
  const std::uint64_t low_low = (a.frac & kLow) * (b.frac & kLow);
  const std::uint64_t middle =
      (high_low & kLow) + (low_high & kLow) + (low_low >> kHalf) + (std::uint64_t{1} << (kHalf - 1));
  return {high_high + (high_low >> kHalf) + (low_high >> kHalf) + (middle >> kHalf), a.exp + b.exp + 64};
}

DiyFp normalized(DiyFp value) {
  const int shift = std::countl_zero(value.frac);
  return {value.frac << shift, value.exp - shift};
}

// The cached power for a scaled exponent, and its decimal exponent k.
DiyFp cached_power(int exp, int* k) {
  const auto guess = static_cast<int>(-(exp + kCachedPowerCount) * kLog10Of2);
  int index = (guess - kFirstCachedPower) / kCachedPowerStep;
  for (;;) {
    TURNSTILE_CHECK(index >= 0 && index < kCachedPowerCount);
    const int scaled = exp + kCachedPowers[static_cast<std::size_t>(index)].exp + 64;
    if (scaled < kMinScaledExp) {
      ++index;
    } else if (scaled > kMaxScaledExp) {
      --index;
    } else {
      *k = kFirstCachedPower + index * kCachedPowerStep;
      return kCachedPowers[static_cast<std::size_t>(index)];
    }
  }
}

// Moves the last digit down while that brings the digits closer to the
// value and keeps them inside the boundaries.
void round_last_digit(std::string& digits, std::uint64_t delta, std::uint64_t rest, std::uint64_t ten_kappa,
                      std::uint64_t distance) {
  while (rest < distance && delta - rest >= ten_kappa &&
         (rest + ten_kappa < distance || distance - rest > rest + ten_kappa - distance)) {
    --digits.back();
    rest += ten_kappa;
  }
}

// Grisu2's digits of a positive finite `value`; *exponent10 is the
// decimal exponent of the last digit.
std::string grisu_digits(double value, int* exponent10) {
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const auto biased = static_cast<int>((bits >> kSignificandBits) & kExponentMask);
  DiyFp w{bits & kFractionMask, 1 - kExponentBias};
  if (biased != 0) w = {w.frac + kHiddenBit, biased - kExponentBias};

  // The boundaries halfway to the neighbouring doubles, on one exponent.
  const DiyFp upper = normalized({(w.frac << 1) + 1, w.exp - 1});
  const int lower_shift = w.frac == kHiddenBit ? 2 : 1;
  DiyFp lower{(w.frac << lower_shift) - 1, w.exp - lower_shift};
  lower = {lower.frac << (lower.exp - upper.exp), upper.exp};

  int k = 0;
  const DiyFp power = cached_power(upper.exp, &k);
  const DiyFp scaled_w = multiply(normalized(w), power);
  DiyFp scaled_upper = multiply(upper, power);
  DiyFp scaled_lower = multiply(lower, power);
  ++scaled_lower.frac;
  --scaled_upper.frac;
  *exponent10 = -k;

  const std::uint64_t distance = scaled_upper.frac - scaled_w.frac;
  std::uint64_t delta = scaled_upper.frac - scaled_lower.frac;
  const int shift = -scaled_upper.exp;
  const std::uint64_t one = std::uint64_t{1} << shift;
  std::uint64_t integer = scaled_upper.frac >> shift;
  std::uint64_t fraction = scaled_upper.frac & (one - 1);
  std::string digits;
  int kappa = kIntegerDigits;
  while (kappa > 0) {
    const std::uint64_t divisor = kPowersOfTen[static_cast<std::size_t>(kappa - 1)];
    const std::uint64_t digit = integer / divisor;
    if (digit != 0 || !digits.empty()) digits += static_cast<char>('0' + digit);
    integer -= digit * divisor;
    --kappa;
    const std::uint64_t rest = (integer << shift) + fraction;
    if (rest <= delta) {
      *exponent10 += kappa;
      round_last_digit(digits, delta, rest, divisor << shift, distance);
      return digits;
    }
  }
  for (std::size_t unit = 1;; ++unit) {
    fraction *= 10;
    delta *= 10;
    --kappa;
    const std::uint64_t digit = fraction >> shift;
    if (digit != 0 || !digits.empty()) digits += static_cast<char>('0' + digit);
    fraction &= one - 1;
    if (fraction < delta) {
      *exponent10 += kappa;
      round_last_digit(digits, delta, fraction, one, distance * kPowersOfTen[unit]);
      return digits;
    }
  }
}

// fpconv's layout of `digits` * 10^exponent10.
std::string laid_out(std::string digits, int exponent10, bool negative) {
  const int count = static_cast<int>(digits.size());
  int exponent = std::abs(exponent10 + count - 1);
  if (exponent10 >= 0 && exponent < count + kPlainIntegerSlack) {
    return digits + std::string(static_cast<std::size_t>(exponent10), '0');
  }
  if (exponent10 < 0 && (exponent10 > kSmallFractionExponent || exponent < kPlainFractionDigits)) {
    const int integer_digits = count + exponent10;
    if (integer_digits <= 0) return "0." + std::string(static_cast<std::size_t>(-integer_digits), '0') + digits;
    return digits.insert(static_cast<std::size_t>(integer_digits), ".");
  }
  const int kept = std::min(count, kMaxExponentDigits - (negative ? 1 : 0));
  std::string text(1, digits[0]);
  if (kept > 1) text += "." + digits.substr(1, static_cast<std::size_t>(kept - 1));
  text += exponent10 + kept - 1 < 0 ? "e-" : "e+";
  text += std::to_string(exponent);
  return text;
}

}  // namespace

std::string grisu_text(double value) {
  const std::string sign = std::signbit(value) ? "-" : "";
  if (value == 0) return sign + "0";
  if (std::isnan(value)) return sign + "nan";
  if (std::isinf(value)) return sign + "inf";
  int exponent10 = 0;
  std::string digits = grisu_digits(std::fabs(value), &exponent10);
  return sign + laid_out(std::move(digits), exponent10, !sign.empty());
}

std::string double_reply_text(const ServerProfile& profile, double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text;
  if (!profile.shortest_double_text) {
    assign_g17(value, text);
    return text;
  }
  // Redis 7.2's d2string: one spelling of NaN, a signed zero, then as a
  // number argument.
  if (std::isnan(value)) return "nan";
  if (value == 0) return std::signbit(value) ? "-0" : "0";
  assign_number_argument(profile, value, text);
  return text;
}

void assign_number_argument(const ServerProfile& profile, double value, std::string& text) {
  if (!profile.shortest_double_text) {
    assign_g17(value, text);
    return;
  }
  // double2ll: an integer that fits, -0 included, as an integer.
  if (std::fabs(value) <= kMaxPlainInteger && value == std::trunc(value)) {
    text = std::to_string(static_cast<std::int64_t>(value));
    return;
  }
  text = grisu_text(value);
}

}  // namespace turnstile::sim
