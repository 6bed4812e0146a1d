// The fabric phase of RunValidation (coordinator.h).
#include "railyard/validate/coordinator_internal.h"

namespace railyard::validate::internal {

void RunFabricPhase(Run&) {}

}  // namespace railyard::validate::internal
