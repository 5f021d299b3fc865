#include "turnstile/reply.h"

#include <utility>

#include "core/check.h"

namespace turnstile {

Reply Reply::integer(std::int64_t value) {
  Reply reply;
  reply.type_ = Type::integer;
  reply.integer_ = value;
  return reply;
}

Reply Reply::bulk(std::string value) {
  Reply reply;
  reply.type_ = Type::bulk;
  reply.string_ = std::move(value);
  return reply;
}

Reply Reply::status(std::string value) {
  Reply reply;
  reply.type_ = Type::status;
  reply.string_ = std::move(value);
  return reply;
}

Reply Reply::error(std::string message) {
  Reply reply;
  reply.type_ = Type::error;
  reply.string_ = std::move(message);
  return reply;
}

Reply Reply::array(std::vector<Reply> elements) {
  Reply reply;
  reply.type_ = Type::array;
  reply.elements_ = std::move(elements);
  return reply;
}

std::int64_t Reply::as_integer() const {
  TURNSTILE_CHECK(type_ == Type::integer);
  return integer_;
}

const std::string& Reply::as_string() const {
  TURNSTILE_CHECK(type_ == Type::bulk || type_ == Type::status || type_ == Type::error);
  return string_;
}

const std::vector<Reply>& Reply::as_array() const {
  TURNSTILE_CHECK(type_ == Type::array);
  return elements_;
}

std::vector<Reply>& Reply::as_array() {
  TURNSTILE_CHECK(type_ == Type::array);
  return elements_;
}

namespace {

void append_quoted(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  out.push_back('"');
}

void append_reply(std::string& out, const Reply& reply) {
  switch (reply.type()) {
    case Reply::Type::nil:
      out += "(nil)";
      return;
    case Reply::Type::integer:
      out += "(integer) " + std::to_string(reply.as_integer());
      return;
    case Reply::Type::bulk:
      append_quoted(out, reply.as_string());
      return;
    case Reply::Type::status:
      out += reply.as_string();
      return;
    case Reply::Type::error:
      out += "(error) " + reply.as_string();
      return;
    case Reply::Type::array: {
      out.push_back('[');
      bool first = true;
      for (const Reply& element : reply.as_array()) {
        if (!first) out += ", ";
        first = false;
        append_reply(out, element);
      }
      out.push_back(']');
      return;
    }
  }
}

}  // namespace

std::string Reply::to_string() const {
  std::string out;
  append_reply(out, *this);
  return out;
}

std::string_view to_string(Reply::Type type) {
  switch (type) {
    case Reply::Type::nil:
      return "nil";
    case Reply::Type::integer:
      return "integer";
    case Reply::Type::bulk:
      return "bulk";
    case Reply::Type::status:
      return "status";
    case Reply::Type::error:
      return "error";
    case Reply::Type::array:
      return "array";
  }
  return "?";
}

}  // namespace turnstile
