// What a graph pass reports back to the pipeline (and from there to --report JSON).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ipex::passes {

struct PassResult {
    bool changed = false;
    int count = 0;                      // rewrites done (folds, removals, merges, casts)
    std::vector<std::string> modules;   // user module paths touched, e.g. "layer1.0.bn1"
    std::vector<std::string> skipped;   // "<module or node>: <why it was left alone>"
    nlohmann::json details;             // pass-specific facts for the report (or null)

    PassResult &merge(const PassResult &other) {
        changed |= other.changed;
        count += other.count;
        modules.insert(modules.end(), other.modules.begin(), other.modules.end());
        skipped.insert(skipped.end(), other.skipped.begin(), other.skipped.end());
        if (!other.details.is_null()) details.merge_patch(other.details);
        return *this;
    }

    nlohmann::json to_json() const {
        nlohmann::json j = {{"changed", changed}, {"count", count}, {"modules", modules}, {"skipped", skipped}};
        if (!details.is_null()) j["details"] = details;
        return j;
    }
};

}  // namespace ipex::passes
