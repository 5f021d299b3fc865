#include "sim/command_table.h"

namespace turnstile::sim {

void register_list_commands(CommandTable&) {}

}  // namespace turnstile::sim
