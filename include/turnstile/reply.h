// turnstile/reply.h
//
// A Redis reply, as both backends hand it to lock code: nil, integer, bulk
// string, status, error, or a (possibly nested) array. It mirrors RESP2, which
// is what EVAL/EVALSHA replies are made of, so a reply from the fake Redis and
// one from a real redis-server compare equal exactly when Redis would have sent
// the same bytes.
//
// Error replies appear as values only inside arrays (a script may return
// {err=...} nested) or from the fake server's raw command path; at the top of a
// Backend call they are raised as typed exceptions (see errors.h).

#ifndef TURNSTILE_REPLY_H_
#define TURNSTILE_REPLY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"

namespace turnstile {

class TURNSTILE_EXPORT Reply {
 public:
  enum class Type : std::uint8_t { nil, integer, bulk, status, error, array };

  // A nil reply (RESP2 null bulk string).
  Reply() = default;

  static Reply nil() { return Reply(); }
  static Reply integer(std::int64_t value);
  static Reply bulk(std::string value);
  static Reply status(std::string value);
  static Reply error(std::string message);
  static Reply array(std::vector<Reply> elements);

  Type type() const { return type_; }
  bool is_nil() const { return type_ == Type::nil; }
  bool is_integer() const { return type_ == Type::integer; }
  bool is_bulk() const { return type_ == Type::bulk; }
  bool is_status() const { return type_ == Type::status; }
  bool is_error() const { return type_ == Type::error; }
  bool is_array() const { return type_ == Type::array; }

  // Accessors assert the type: asking an integer reply for its string is a
  // programmer error, not a runtime condition.
  std::int64_t as_integer() const;
  // The payload of a bulk, status or error reply.
  const std::string& as_string() const;
  const std::vector<Reply>& as_array() const;
  std::vector<Reply>& as_array();

  bool operator==(const Reply& other) const = default;

  // A one-line rendering in the style of redis-cli, for test failures and
  // logs: (nil), (integer) 3, "bulk", status, (error) ERR ..., [a, b].
  std::string to_string() const;

 private:
  Type type_ = Type::nil;
  std::int64_t integer_ = 0;
  std::string string_;
  std::vector<Reply> elements_;
};

TURNSTILE_EXPORT std::string_view to_string(Reply::Type type);

}  // namespace turnstile

#endif  // TURNSTILE_REPLY_H_
