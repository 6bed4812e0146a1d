// The checks Railyard ships: adding one is its file under checks/ plus one line here.
#include "railyard/validate/registry.h"

namespace railyard::validate {

std::unique_ptr<Check> NewMemlockCheck();  // checks/memlock.cc
std::unique_ptr<Check> NewSwapCheck();     // checks/swap.cc

Status RegisterBuiltinChecks(CheckRegistry& registry) {
  for (auto factory : {NewMemlockCheck, NewSwapCheck}) {
    RY_RETURN_IF_ERROR(registry.Register(factory()));
  }
  return Status::Ok();
}

}  // namespace railyard::validate
