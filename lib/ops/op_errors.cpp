#include "ops/op_errors.h"

namespace ipex::ops {

void rethrow_from_op() {
    try {
        throw;
    } catch (const c10::Error &e) {
        const std::string text = e.what_without_backtrace();
        if (text.find(kCallerInputTag) != std::string::npos || text.find(kInternalTag) != std::string::npos) throw;
        TORCH_CHECK(false, kInternalTag, text);
    } catch (const std::exception &e) {
        TORCH_CHECK(false, kInternalTag, e.what());
    }
}

}  // namespace ipex::ops
