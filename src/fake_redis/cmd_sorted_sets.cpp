// Sorted set commands: ZADD ZINCRBY ZSCORE ZREM ZCARD ZRANK ZRANGE
// ZRANGEBYSCORE ZREMRANGEBYSCORE, following Redis 7.0's t_zset.c in the
// order of its checks (options, then scores, then the key).

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/double_text.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

// ---- ZADD / ZINCRBY ----------------------------------------------------------

struct ZaddFlags {
  bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = false;
  // Not an option: the release stores -0 as -0 in a small set (6.2).
  bool keep_negative_zero = false;
};

// What zsetAdd did to one element.
enum class ZaddOutcome { added, updated, unchanged, skipped, nan };

ZaddOutcome zset_add(SortedSet& set, std::string_view member, double score, const ZaddFlags& flags, double* new_score) {
  std::optional<double> current = set.score(member);
  if (!current) {
    if (flags.xx) return ZaddOutcome::skipped;
    set.set(member, score, flags.keep_negative_zero);
    *new_score = score;
    return ZaddOutcome::added;
  }
  if (flags.nx) return ZaddOutcome::skipped;
  if (flags.incr) {
    score += *current;
    if (std::isnan(score)) return ZaddOutcome::nan;
  }
  if ((flags.lt && score >= *current) || (flags.gt && score <= *current)) {
    return ZaddOutcome::skipped;
  }
  *new_score = score;
  if (score == *current) return ZaddOutcome::unchanged;
  set.set(member, score, flags.keep_negative_zero);
  return ZaddOutcome::updated;
}

Reply zadd_generic(CommandContext& context, std::size_t first_score, ZaddFlags flags) {
  const auto& argv = context.argv;
  TURNSTILE_CHECK(first_score == 2 && argv.size() >= 4);  // the command's arity, checked by the server
  for (; first_score < argv.size(); ++first_score) {
    const std::string& option = argv[first_score];
    if (option_is(option, "nx")) {
      flags.nx = true;
    } else if (option_is(option, "xx")) {
      flags.xx = true;
    } else if (option_is(option, "ch")) {
      flags.ch = true;
    } else if (option_is(option, "incr")) {
      flags.incr = true;
    } else if (option_is(option, "gt")) {
      flags.gt = true;
    } else if (option_is(option, "lt")) {
      flags.lt = true;
    } else {
      break;
    }
  }
  const std::size_t pair_arguments = argv.size() - first_score;
  if (pair_arguments == 0 || pair_arguments % 2 != 0) return syntax_error_reply();
  if (flags.nx && flags.xx) return error_reply(redis_errors::kZaddXxNx);
  if ((flags.gt && flags.nx) || (flags.lt && flags.nx) || (flags.gt && flags.lt)) {
    return error_reply(redis_errors::kZaddGtLtNx);
  }
  if (flags.incr && pair_arguments > 2) return error_reply(redis_errors::kZaddIncrPair);
  TURNSTILE_CHECK(!(flags.nx && flags.xx) && !(flags.gt && flags.lt));
  flags.keep_negative_zero = context.server.profile().compact_zset_keeps_negative_zero;

  // Every score is parsed before anything changes: ZADD is all or nothing.
  std::vector<double> scores;
  for (std::size_t i = first_score; i < argv.size(); i += 2) {
    std::optional<double> score = parse_float(argv[i]);
    if (!score) return error_reply(redis_errors::kNotFloat);
    scores.push_back(*score);
  }
  TURNSTILE_CHECK(scores.size() * 2 == pair_arguments && (!flags.incr || scores.size() == 1));

  Keyspace& keyspace = context.keyspace;
  Typed<SortedSet> set = keyspace.find_as<SortedSet>(argv[1]);
  if (set.wrong_type) return wrong_type_reply();
  std::int64_t added = 0, updated = 0, processed = 0;
  double last_score = 0;
  if (set.value || !flags.xx) {
    if (!set.value) set = keyspace.find_or_create<SortedSet>(argv[1]);
    for (std::size_t i = 0; i < scores.size(); ++i) {
      ZaddOutcome outcome = zset_add(*set.value, argv[first_score + 2 * i + 1], scores[i], flags, &last_score);
      if (outcome == ZaddOutcome::nan) {
        keyspace.erase_if_empty(argv[1]);
        return error_reply(redis_errors::kScoreNaN);
      }
      if (outcome == ZaddOutcome::added) ++added;
      if (outcome == ZaddOutcome::updated) ++updated;
      if (outcome != ZaddOutcome::skipped) ++processed;
    }
    keyspace.erase_if_empty(argv[1]);
  }
  TURNSTILE_CHECK(added + updated <= processed && processed <= static_cast<std::int64_t>(scores.size()));
  if (flags.incr)
    return processed > 0 ? Reply::bulk(double_reply_text(context.server.profile(), last_score)) : Reply::nil();
  return Reply::integer(flags.ch ? added + updated : added);
}

Reply zadd(CommandContext& context) { return zadd_generic(context, 2, {}); }

Reply zincrby(CommandContext& context) {
  ZaddFlags flags;
  flags.incr = true;
  return zadd_generic(context, 2, flags);
}

// ---- single-member commands ------------------------------------------------------

Reply zscore(CommandContext& context) {
  Typed<SortedSet> set = context.keyspace.find_as<SortedSet>(context.argv[1]);
  if (set.wrong_type) return wrong_type_reply();
  std::optional<double> score = set.value ? set.value->score(context.argv[2]) : std::nullopt;
  return score ? Reply::bulk(double_reply_text(context.server.profile(), *score)) : Reply::nil();
}

Reply zrank(CommandContext& context) {
  Typed<SortedSet> set = context.keyspace.find_as<SortedSet>(context.argv[1]);
  if (set.wrong_type) return wrong_type_reply();
  if (!set.value || !set.value->score(context.argv[2])) return Reply::nil();
  const std::size_t rank = set.value->rank(context.argv[2]);
  TURNSTILE_CHECK(rank < set.value->size());
  return Reply::integer(static_cast<std::int64_t>(rank));
}

// ---- ranges -------------------------------------------------------------------------

// A score interval as Redis's zslParseRange reads it: "(" makes a bound
// exclusive; the rest goes to strtod, which must stop at a NUL (so "(" alone
// is an exclusive 0 and " 1" is 1, as in Redis).
struct ScoreRange {
  double min = 0, max = 0;
  bool min_exclusive = false, max_exclusive = false;

  bool above_min(double score) const { return min_exclusive ? score > min : score >= min; }
  bool below_max(double score) const { return max_exclusive ? score < max : score <= max; }
  bool contains(double score) const { return above_min(score) && below_max(score); }
};

std::optional<double> parse_score_bound(const std::string& text, bool* exclusive) {
  const char* start = text.c_str();
  *exclusive = text[0] == '(';
  if (*exclusive) ++start;
  char* end = nullptr;
  double value = std::strtod(start, &end);
  if (*end != '\0' || std::isnan(value)) return std::nullopt;
  return value;
}

std::optional<ScoreRange> parse_score_range(const std::string& min, const std::string& max) {
  ScoreRange range;
  std::optional<double> low = parse_score_bound(min, &range.min_exclusive);
  std::optional<double> high = parse_score_bound(max, &range.max_exclusive);
  if (!low || !high) return std::nullopt;
  range.min = *low;
  range.max = *high;
  return range;
}

// A lex interval: "[x" inclusive, "(x" exclusive, "-" and "+" the ends.
struct LexBound {
  enum class Kind { minus_infinity, plus_infinity, inclusive, exclusive } kind;
  std::string value;
};

std::optional<LexBound> parse_lex_bound(const std::string& text) {
  if (text == "-") return LexBound{LexBound::Kind::minus_infinity, {}};
  if (text == "+") return LexBound{LexBound::Kind::plus_infinity, {}};
  if (!text.empty() && text[0] == '[') return LexBound{LexBound::Kind::inclusive, text.substr(1)};
  if (!text.empty() && text[0] == '(') return LexBound{LexBound::Kind::exclusive, text.substr(1)};
  return std::nullopt;
}

bool lex_above_min(const std::string& member, const LexBound& min) {
  switch (min.kind) {
    case LexBound::Kind::minus_infinity:
      return true;
    case LexBound::Kind::plus_infinity:
      return false;
    case LexBound::Kind::inclusive:
      return member >= min.value;
    case LexBound::Kind::exclusive:
      return member > min.value;
  }
  return false;
}

bool lex_below_max(const std::string& member, const LexBound& max) {
  switch (max.kind) {
    case LexBound::Kind::minus_infinity:
      return false;
    case LexBound::Kind::plus_infinity:
      return true;
    case LexBound::Kind::inclusive:
      return member <= max.value;
    case LexBound::Kind::exclusive:
      return member < max.value;
  }
  return false;
}

enum class RangeKind { rank, score, lex };

struct RangeRequest {
  RangeKind kind = RangeKind::rank;
  bool reverse = false;
  bool with_scores = false;
  std::int64_t offset = 0;
  std::int64_t limit = -1;  // negative: no limit
  bool has_limit = false;
  const ServerProfile* profile = nullptr;  // how the scores print
};

Reply emit(const std::vector<const SortedSet::Element*>& elements, const RangeRequest& request) {
  std::vector<Reply> replies;
  replies.reserve(elements.size() * (request.with_scores ? 2 : 1));
  for (const SortedSet::Element* element : elements) {
    replies.push_back(Reply::bulk(element->second));
    if (request.with_scores) replies.push_back(Reply::bulk(double_reply_text(*request.profile, element->first)));
  }
  return Reply::array(std::move(replies));
}

Reply range_by_rank(const SortedSet& set, std::int64_t start, std::int64_t stop, const RangeRequest& request) {
  const auto length = static_cast<std::int64_t>(set.size());
  if (start < 0) start += length;
  if (stop < 0) stop += length;
  if (start < 0) start = 0;
  if (start > stop || start >= length) return Reply::array({});
  if (stop >= length) stop = length - 1;
  TURNSTILE_CHECK(0 <= start && start <= stop && stop < length);
  std::vector<const SortedSet::Element*> elements;
  const auto& ordered = set.by_score();
  for (std::int64_t i = start; i <= stop; ++i) {
    std::int64_t index = request.reverse ? length - 1 - i : i;
    elements.push_back(&ordered.begin()[index]);
  }
  return emit(elements, request);
}

// Walks the set in the request's direction, skipping elements before the
// range, then `offset` elements in it, then emitting up to `limit` until the
// first element past the range (Redis's genericZrangebyscoreCommand).
template <class AboveStart, class BeforeEnd>
Reply range_by_order(const SortedSet& set, const RangeRequest& request, AboveStart past_start, BeforeEnd before_end) {
  if (request.offset > 0 && request.offset >= static_cast<std::int64_t>(set.size())) {
    return Reply::array({});
  }
  std::vector<const SortedSet::Element*> elements;
  auto walk = [&](auto begin, auto end) {
    auto it = begin;
    while (it != end && !past_start(*it)) ++it;
    // A negative offset skips everything, as Redis's `while (offset--)`.
    for (std::int64_t skip = request.offset; it != end && skip != 0; --skip) ++it;
    for (std::int64_t left = request.limit; it != end && left != 0; --left, ++it) {
      if (!before_end(*it)) break;
      elements.push_back(&*it);
    }
  };
  if (request.reverse) {
    walk(set.by_score().rbegin(), set.by_score().rend());
  } else {
    walk(set.by_score().begin(), set.by_score().end());
  }
  return emit(elements, request);
}

// ZRANGE (kind and direction from options) and ZRANGEBYSCORE (fixed).
Reply zrange_generic(CommandContext& context, std::optional<RangeKind> fixed_kind) {
  const auto& argv = context.argv;
  TURNSTILE_CHECK(argv.size() >= 4);  // the command's arity
  RangeRequest request;
  request.profile = &context.server.profile();
  bool kind_chosen = fixed_kind.has_value();
  if (fixed_kind) request.kind = *fixed_kind;
  for (std::size_t i = 4; i < argv.size(); ++i) {
    const std::size_t arguments_left = argv.size() - i - 1;
    if (option_is(argv[i], "withscores")) {
      request.with_scores = true;
    } else if (option_is(argv[i], "limit") && arguments_left >= 2) {
      std::optional<std::int64_t> offset = parse_integer(argv[i + 1]);
      std::optional<std::int64_t> limit = parse_integer(argv[i + 2]);
      if (!offset || !limit) return not_integer_reply();
      request.offset = *offset;
      request.limit = *limit;
      request.has_limit = true;
      i += 2;
    } else if (!fixed_kind && !request.reverse && option_is(argv[i], "rev")) {
      request.reverse = true;
    } else if (!kind_chosen && option_is(argv[i], "bylex")) {
      request.kind = RangeKind::lex;
      kind_chosen = true;
    } else if (!kind_chosen && option_is(argv[i], "byscore")) {
      request.kind = RangeKind::score;
      kind_chosen = true;
    } else {
      return syntax_error_reply();
    }
  }
  // Redis tests "limit != -1": LIMIT 0 -1 with a rank range is allowed.
  if (request.has_limit && request.limit != -1 && request.kind == RangeKind::rank) {
    return error_reply(redis_errors::kZrangeLimitNeedsBy);
  }
  if (request.with_scores && request.kind == RangeKind::lex) return error_reply(redis_errors::kWithScoresByLex);
  // Reversed score and lex ranges are written [max, min].
  const bool swap = request.reverse && request.kind != RangeKind::rank;
  const std::string& min = swap ? argv[3] : argv[2];
  const std::string& max = swap ? argv[2] : argv[3];

  std::optional<std::int64_t> start, stop;
  std::optional<ScoreRange> scores;
  std::optional<LexBound> lex_min, lex_max;
  switch (request.kind) {
    case RangeKind::rank:
      start = parse_integer(min);
      stop = parse_integer(max);
      if (!start || !stop) return not_integer_reply();
      break;
    case RangeKind::score:
      scores = parse_score_range(min, max);
      if (!scores) return error_reply(redis_errors::kMinMaxNotFloat);
      break;
    case RangeKind::lex:
      lex_min = parse_lex_bound(min);
      lex_max = parse_lex_bound(max);
      if (!lex_min || !lex_max) return error_reply(redis_errors::kLexRangeInvalid);
      break;
  }

  Typed<SortedSet> set = context.keyspace.find_as<SortedSet>(argv[1]);
  if (!set.value && !set.wrong_type) return Reply::array({});
  if (set.wrong_type) return wrong_type_reply();
  switch (request.kind) {
    case RangeKind::rank:
      return range_by_rank(*set.value, *start, *stop, request);
    case RangeKind::score:
      if (request.reverse) {
        return range_by_order(
            *set.value, request, [&](const auto& e) { return scores->below_max(e.first); },
            [&](const auto& e) { return scores->above_min(e.first); });
      }
      return range_by_order(
          *set.value, request, [&](const auto& e) { return scores->above_min(e.first); },
          [&](const auto& e) { return scores->below_max(e.first); });
    case RangeKind::lex:
      if (request.reverse) {
        return range_by_order(
            *set.value, request, [&](const auto& e) { return lex_below_max(e.second, *lex_max); },
            [&](const auto& e) { return lex_above_min(e.second, *lex_min); });
      }
      return range_by_order(
          *set.value, request, [&](const auto& e) { return lex_above_min(e.second, *lex_min); },
          [&](const auto& e) { return lex_below_max(e.second, *lex_max); });
  }
  return Reply::array({});
}

Reply zrange(CommandContext& context) { return zrange_generic(context, std::nullopt); }
Reply zrangebyscore(CommandContext& context) { return zrange_generic(context, RangeKind::score); }

// ZCOUNT: the members within a score interval, found by two binary searches
// (Redis walks its skiplist in O(log N) as well).
Reply zcount(CommandContext& context) {
  std::optional<ScoreRange> range = parse_score_range(context.argv[2], context.argv[3]);
  if (!range) return error_reply(redis_errors::kMinMaxNotFloat);
  Typed<SortedSet> set = context.keyspace.find_as<SortedSet>(context.argv[1]);
  if (set.wrong_type) return wrong_type_reply();
  if (!set.value) return Reply::integer(0);
  const SortedSet::Ordered& ordered = set.value->by_score();
  const auto first = std::partition_point(ordered.begin(), ordered.end(),
                                          [&](const SortedSet::Element& e) { return !range->above_min(e.first); });
  const auto last = std::partition_point(first, ordered.end(),
                                         [&](const SortedSet::Element& e) { return range->below_max(e.first); });
  return Reply::integer(static_cast<std::int64_t>(last - first));
}

Reply zremrangebyscore(CommandContext& context) {
  std::optional<ScoreRange> range = parse_score_range(context.argv[2], context.argv[3]);
  if (!range) return error_reply(redis_errors::kMinMaxNotFloat);
  Typed<SortedSet> set = context.keyspace.find_as<SortedSet>(context.argv[1]);
  if (set.wrong_type) return wrong_type_reply();
  if (!set.value) return Reply::integer(0);
  std::vector<std::string> doomed;
  for (const auto& [score, member] : set.value->by_score()) {
    if (range->contains(score)) doomed.push_back(member);
  }
  for (const std::string& member : doomed) {
    const bool erased = set.value->erase(member);
    TURNSTILE_CHECK(erased);
  }
  context.keyspace.erase_if_empty(context.argv[1]);
  return Reply::integer(static_cast<std::int64_t>(doomed.size()));
}

}  // namespace

void register_sorted_set_commands(CommandTable& table) {
  table.add({"zadd", -4, kCommandWrite, zadd});
  table.add({"zincrby", 4, kCommandWrite, zincrby});
  table.add({"zscore", 3, kCommandReadOnly, zscore});
  table.add({"zrem", -3, kCommandWrite, erase_members<SortedSet>});
  table.add({"zcard", 2, kCommandReadOnly, aggregate_size<SortedSet>});
  table.add({"zrank", 3, kCommandReadOnly, zrank});
  table.add({"zrange", -4, kCommandReadOnly, zrange});
  table.add({"zrangebyscore", -4, kCommandReadOnly, zrangebyscore});
  table.add({"zcount", 4, kCommandReadOnly, zcount});
  table.add({"zremrangebyscore", 4, kCommandWrite, zremrangebyscore});
}

}  // namespace turnstile::sim
