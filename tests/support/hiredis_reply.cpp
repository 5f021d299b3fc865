#include "hiredis_reply.h"

#include <stdexcept>

namespace turnstile::testing {

Reply from_hiredis(const redisReply* reply) {
  switch (reply->type) {
    case REDIS_REPLY_NIL:
      return Reply::nil();
    case REDIS_REPLY_INTEGER:
      return Reply::integer(reply->integer);
    case REDIS_REPLY_STRING:
      return Reply::bulk(std::string(reply->str, reply->len));
    case REDIS_REPLY_STATUS:
      return Reply::status(std::string(reply->str, reply->len));
    case REDIS_REPLY_ERROR:
      return Reply::error(std::string(reply->str, reply->len));
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(reply->elements);
      for (std::size_t i = 0; i < reply->elements; ++i) elements.push_back(from_hiredis(reply->element[i]));
      return Reply::array(std::move(elements));
    }
    default:
      throw std::runtime_error("unexpected RESP3 reply type " + std::to_string(reply->type));
  }
}

Reply hiredis_command(redisContext* context, const std::vector<std::string>& argv) {
  std::vector<const char*> pointers;
  std::vector<size_t> lengths;
  for (const std::string& arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context, static_cast<int>(argv.size()), pointers.data(), lengths.data()));
  if (reply == nullptr) throw std::runtime_error(std::string("redis command failed: ") + context->errstr);
  Reply converted = from_hiredis(reply);
  freeReplyObject(reply);
  return converted;
}

}  // namespace turnstile::testing
