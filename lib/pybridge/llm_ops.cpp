#include "pybridge/llm_ops.h"

#include <map>
#include <mutex>

#include "base/errors.h"
#include "base/json_io.h"
#include "commands/generate.h"
#include "pybridge/op_guard.h"

namespace ipex::pybridge {
namespace {

// The loaded models by handle. A generate call holds its model by shared_ptr, so a release
// while it runs frees the model afterwards.
class Registry {
public:
    int64_t add(commands::LoadedLlm loaded) {
        std::lock_guard<std::mutex> lock(mutex_);
        models_.emplace(next_, std::make_shared<const commands::LoadedLlm>(std::move(loaded)));
        return next_++;
    }
    std::shared_ptr<const commands::LoadedLlm> get(int64_t handle) const {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = models_.find(handle);
        if (it == models_.end()) throw_usage("no loaded model has handle " + std::to_string(handle) + " (released?)");
        return it->second;
    }
    void remove(int64_t handle) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (models_.erase(handle) == 0) throw_usage("no loaded model has handle " + std::to_string(handle));
    }

private:
    mutable std::mutex mutex_;
    std::map<int64_t, std::shared_ptr<const commands::LoadedLlm>> models_;
    int64_t next_ = 1;
};

Registry &registry() {
    static Registry r;
    return r;
}

// [[1, 2, 3], ...] as the CLI's --prompt-ids values ("1,2,3").
std::vector<std::string> id_lists(const JsonReader &read) {
    std::vector<std::string> out;
    if (!read.has("prompt_ids")) return out;
    for (const auto &ids : read.array("prompt_ids")) {
        if (!ids.is_array() || ids.empty()) throw_usage("prompt_ids: each prompt must be a non-empty list of token ids");
        std::string text;
        for (const auto &id : ids) {
            if (!id.is_number_integer()) throw_usage("prompt_ids: token ids must be integers (got " + id.dump() + ")");
            text += (text.empty() ? "" : ",") + id.dump();
        }
        out.push_back(text);
    }
    return out;
}

}  // namespace

std::string llm_load(const std::string &dir, const std::string &options_json) {
    return run_guarded_op("llm.load", [&] {
               const nlohmann::json options =
                   parse_options("llm.load", options_json, {"dtype", "woq_dtype", "group_size", "lowp_mode", "threads"});
               const JsonReader read(options, "llm.load options");
               commands::LlmLoadRequest r;
               r.dtype = read.str_or("dtype", r.dtype);
               if (r.dtype != "bf16" && r.dtype != "fp32") throw_usage("dtype '" + r.dtype + "' is not one of bf16, fp32");
               r.woq.dtype = read.str_or("woq_dtype", "");
               if (!r.woq.dtype.empty() && r.woq.dtype != "int4" && r.woq.dtype != "int8")
                   throw_usage("woq_dtype '" + r.woq.dtype + "' is not one of int4, int8");
               if (read.has("group_size")) r.woq.group_size = read.integer("group_size");
               if (read.has("lowp_mode")) {
                   const std::string mode = read.str("lowp_mode");
                   if (mode != "auto" && mode != "fp32" && mode != "bf16" && mode != "int8")
                       throw_usage("lowp_mode '" + mode + "' is not one of auto, fp32, bf16, int8");
                   r.woq.lowp_mode = mode;
               }
               if (read.has("threads")) r.threads = static_cast<int>(read.integer("threads", 1, 1 << 16));
               commands::LoadedLlm loaded = commands::load_for_generate(dir, r);
               nlohmann::json j = {{"architecture", loaded.model->config().architecture},
                                   {"weights", loaded.model->weights_description()},
                                   {"tokenizer", loaded.tokenizer != nullptr},
                                   {"vocab_size", loaded.model->config().vocab_size}};
               j["handle"] = registry().add(std::move(loaded));
               return j;
           })
        .dump();
}

std::string llm_generate(int64_t handle, const std::string &request_json) {
    return run_guarded_op("llm.generate", [&] {
               const auto loaded = registry().get(handle);
               const nlohmann::json options = parse_options(
                   "llm.generate", request_json,
                   {"prompts", "prompt_ids", "max_new_tokens", "max_length", "greedy", "temperature", "top_k", "top_p",
                    "seed", "repetition_penalty", "no_special", "allow_long_context"});
               const JsonReader read(options, "llm.generate request");
               commands::GenerateRequest r;
               if (read.has("prompts"))
                   for (const auto &p : read.array("prompts")) {
                       if (!p.is_string()) throw_usage("prompts: each prompt must be a string (got " + p.dump() + ")");
                       r.prompts.push_back(p.get<std::string>());
                   }
               r.prompt_ids = id_lists(read);
               r.max_new_tokens = read.integer_or("max_new_tokens", r.max_new_tokens);
               if (read.has("max_length")) r.max_length = read.integer("max_length");
               r.greedy = read.boolean_or("greedy", false);
               if (read.has("temperature")) r.temperature = read.number("temperature");
               if (read.has("top_k")) r.top_k = read.integer("top_k");
               if (read.has("top_p")) r.top_p = read.number("top_p");
               r.seed = static_cast<uint64_t>(read.integer_or("seed", 0, 0));
               if (read.has("repetition_penalty")) r.repetition_penalty = read.number("repetition_penalty");
               r.no_special = read.boolean_or("no_special", false);
               r.allow_long_context = read.boolean_or("allow_long_context", false);
               r.stream = false;
               return commands::run_generate(r, *loaded, [](const std::string &) {}).to_json();
           })
        .dump();
}

void llm_release(int64_t handle) {
    run_guarded_op("llm.release", [&] {
        registry().remove(handle);
        return nlohmann::json::object();
    });
}

}  // namespace ipex::pybridge
