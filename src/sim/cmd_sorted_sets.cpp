#include "sim/command_table.h"

namespace turnstile::sim {

void register_sorted_set_commands(CommandTable&) {}

}  // namespace turnstile::sim
