#include <iostream>

#include "commands.h"
#include "model/inspect.h"

namespace ipex::app {

Runner setup_inspect(CLI::App &sub) {
    struct Args {
        std::string model;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    sub.add_option("MODEL", args->model, "TorchScript model file")->required();
    sub.add_flag("--json", args->json, "print the report as JSON");
    return [args] {
        const model::LoadedModel loaded = model::load_model(args->model);
        const nlohmann::json report = model::inspect_model(loaded);
        std::cout << (args->json ? report.dump(2) + "\n" : model::format_inspect(report));
        return 0;
    };
}

}  // namespace ipex::app
