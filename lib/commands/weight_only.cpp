#include "commands/weight_only.h"

#include "base/errors.h"

namespace ipex::commands {

int WoqRequest::bits() const { return dtype == "int4" ? 4 : dtype == "int8" ? 8 : 0; }

void WoqRequest::check() const {
    if (!group_size || *group_size == -1 || (*group_size > 0 && *group_size <= kMaxGroupSize)) return;
    throw_usage("--group-size must be a positive number of input channels up to " + std::to_string(kMaxGroupSize) +
                " or -1, got " + std::to_string(*group_size));
}

}  // namespace ipex::commands
