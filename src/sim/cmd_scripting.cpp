// Placeholder until the scripting commands land.
#include "sim/command_table.h"

namespace turnstile::sim {

void register_scripting_commands(CommandTable&) {}

}  // namespace turnstile::sim
