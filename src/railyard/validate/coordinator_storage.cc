// The storage and collective phases of RunValidation (coordinator.h).
#include "railyard/validate/coordinator_internal.h"

namespace railyard::validate::internal {

void RunStoragePhase(Run&) {}
void RunCollectivePhase(Run&) {}

}  // namespace railyard::validate::internal
