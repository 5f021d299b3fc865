#include "redis/reply_conversion.h"

#include <string>
#include <utility>
#include <vector>

#include "turnstile/errors.h"

namespace turnstile::redis {

Reply convert_reply(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_NIL:
      return Reply::nil();
    case REDIS_REPLY_INTEGER:
      return Reply::integer(reply.integer);
    case REDIS_REPLY_STRING:
      return Reply::bulk(std::string(reply.str, reply.len));
    case REDIS_REPLY_STATUS:
      return Reply::status(std::string(reply.str, reply.len));
    case REDIS_REPLY_ERROR:
      return Reply::error(std::string(reply.str, reply.len));
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(reply.elements);
      for (std::size_t i = 0; i < reply.elements; ++i) elements.push_back(convert_reply(*reply.element[i]));
      return Reply::array(std::move(elements));
    }
    default:
      throw ProtocolError("unexpected reply type " + std::to_string(reply.type) + " (turnstile speaks RESP2 only)");
  }
}

}  // namespace turnstile::redis
