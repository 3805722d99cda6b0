// Calibration recipes (recipes/int8-default.json, recipes/int8-smoothquant.json): the
// activation dtype and observer, the weight scheme and optional SmoothQuant alpha.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "quant/observers.h"

namespace ipex::quant {

constexpr const char *kRecipeFormat = "ipex-quant-recipe";

struct Recipe {
    QDtype activation_dtype = QDtype::u8;
    ObserverParams activation_observer{ObserverKind::histogram_l2};
    std::optional<double> smooth_quant_alpha;
    nlohmann::json source;  // the recipe as read, recorded in the qconfig
};

// The built-in default (the same as recipes/int8-default.json).
Recipe default_recipe();
// Reads and validates a recipe file (exit 3 naming the field).
Recipe load_recipe(const std::string &path);
Recipe parse_recipe(const std::string &text, const std::string &where);
nlohmann::json recipe_to_json(const Recipe &recipe);

}  // namespace ipex::quant
