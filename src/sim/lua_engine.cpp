// Placeholder until the Lua engine lands.
#include "sim/lua_engine.h"

namespace turnstile::sim {

struct LuaEngine::Impl {};

LuaEngine::LuaEngine() : impl_(std::make_unique<Impl>()) {}
LuaEngine::~LuaEngine() = default;
Reply LuaEngine::load(std::string_view) { return Reply::error("ERR not implemented"); }
bool LuaEngine::exists(std::string_view) const { return false; }
void LuaEngine::flush() {}
Reply LuaEngine::eval(std::string_view, const std::vector<std::string>&,
                      const std::vector<std::string>&, const CommandCallback&) {
  return Reply::error("ERR not implemented");
}
Reply LuaEngine::evalsha(std::string_view, const std::vector<std::string>&,
                         const std::vector<std::string>&, const CommandCallback&) {
  return Reply::error("ERR not implemented");
}
std::string sha1_hex(std::string_view) { return {}; }

}  // namespace turnstile::sim
