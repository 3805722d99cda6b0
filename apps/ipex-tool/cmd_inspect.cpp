#include <iostream>

#include "commands.h"
#include "model/inspect.h"
#include "options.h"

namespace ipex::app {

Runner setup_inspect(CLI::App &sub) {
    struct Args {
        std::string model;
        commands::JsonOutput json;
    };
    auto args = std::make_shared<Args>();
    sub.add_option("MODEL", args->model, "TorchScript model file")->required();
    add_json_option(sub, args->json, JsonForm::flag, "print the report as JSON");
    return [args] {
        const model::LoadedModel loaded = model::load_model(args->model);
        const nlohmann::json report = model::inspect_model(loaded);
        if (args->json.wanted()) args->json.write(report);
        else std::cout << model::format_inspect(report);
        return 0;
    };
}

}  // namespace ipex::app
