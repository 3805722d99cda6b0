#include "commands/llm_load.h"

#include <ATen/Parallel.h>

#include "base/log.h"
#include "commands/threads.h"

namespace ipex::commands {

void LlmLoadRequest::check() const {
    thread_count(threads);
    woq.check();
}

llm::LoadOptions LlmLoadRequest::options() const {
    llm::LoadOptions o;
    o.dtype = dtype;
    o.woq_bits = woq.bits();
    o.group_size = woq.group_size.value_or(kGroupAuto);
    // "auto" is resolved by the loader, which knows the bits of a GPTQ/AWQ checkpoint's weights.
    o.lowp_mode = woq.lowp_mode.value_or("auto");
    o.qconfig = qconfig;
    o.mmap = !no_mmap;
    return o;
}

std::shared_ptr<const llm::Model> load_llm(const std::string &dir, const LlmLoadRequest &request) {
    at::set_num_threads(thread_count(request.threads));
    auto model = llm::Model::load(dir, request.options());
    log::verbose("loaded " + model->config().architecture + " (" + model->weights_description() + ")");
    if (model->config().num_layers > 0) log::verbose("layer 0: " + model->layer_description(0));
    return model;
}

}  // namespace ipex::commands
