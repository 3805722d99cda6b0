#include "quant/recipe.h"

#include <fstream>
#include <sstream>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "quant/json_reader.h"

namespace ipex::quant {
namespace {
constexpr const char *kRecipeHint = "see recipes/int8-default.json for the format";
constexpr uint64_t kMaxRecipeBytes = uint64_t(1) << 20;
}  // namespace

Recipe default_recipe() {
    Recipe r;
    r.source = recipe_to_json(r);
    return r;
}

nlohmann::json recipe_to_json(const Recipe &recipe) {
    nlohmann::json observer = {{"name", observer_name(recipe.activation_observer.kind)}};
    const ObserverParams &p = recipe.activation_observer;
    if (p.kind == ObserverKind::moving_average) observer["averaging_constant"] = p.averaging_constant;
    if (p.kind != ObserverKind::min_max && p.kind != ObserverKind::moving_average) observer["bins"] = p.bins;
    if (p.kind == ObserverKind::percentile) observer["percentile"] = p.percentile;
    nlohmann::json j = {{"format", kRecipeFormat},
                        {"version", 1},
                        {"activation", {{"dtype", qdtype_name(recipe.activation_dtype)}, {"observer", observer}}},
                        {"weight", {{"dtype", "s8"}, {"scheme", "per_channel_symmetric"}}}};
    if (recipe.smooth_quant_alpha) j["smooth_quant"] = {{"alpha", *recipe.smooth_quant_alpha}};
    return j;
}

Recipe parse_recipe(const std::string &text, const std::string &where) {
    const nlohmann::json j = parse_json(text, where, kRecipeHint);
    const detail::Reader r(j, where, "", kRecipeHint);
    if (r.str("format") != kRecipeFormat) r.fail("format", std::string("must be '") + kRecipeFormat + "'");
    if (r.integer("version") != 1) r.fail("version", "must be 1");
    Recipe recipe;
    const detail::Reader act = r.object("activation");
    const std::string dtype = act.str("dtype");
    if (!parse_qdtype_name(dtype, recipe.activation_dtype)) act.fail("dtype", "'" + dtype + "' is not u8 or s8");
    recipe.activation_observer = detail::read_observer(act.object("observer"));
    if (r.has("weight")) {
        const detail::Reader w = r.object("weight");
        if (w.str("dtype") != "s8") w.fail("dtype", "must be s8");
        if (w.has("scheme") && w.str("scheme") != "per_channel_symmetric")
            w.fail("scheme", "must be per_channel_symmetric");
    }
    if (r.has("smooth_quant")) {
        const detail::Reader sq = r.object("smooth_quant");
        const double alpha = sq.number("alpha");
        if (!(alpha >= 0.0 && alpha <= 1.0)) sq.fail("alpha", "must be in [0, 1]");
        recipe.smooth_quant_alpha = alpha;
    }
    recipe.source = recipe_to_json(recipe);
    return recipe;
}

Recipe load_recipe(const std::string &path) {
    check_input_file(path, "recipe");
    return parse_recipe(read_bounded_file(path, kMaxRecipeBytes, "recipe"), path);
}

}  // namespace ipex::quant
