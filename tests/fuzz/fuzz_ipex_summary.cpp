// Fuzz target: IPEX's qconfig summary read against a small model (a conv, then a linear called
// twice) turns any byte string into a valid qconfig of ours or a bad-input error (exit 3),
// never a crash; what it accepts passes our own qconfig loader.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "base/json_io.h"
#include "base/log.h"
#include "pass_test_utils.h"
#include "quant/ipex_summary.h"

namespace {

const ipex::quant::PreparedModel &prepared() {
    static const ipex::quant::PreparedModel model = [] {
        namespace t = ipex::passes::testing;
        ipex::log::set_level(ipex::log::Level::quiet);
        auto m = t::make_module("ConvFc",
                                "def forward(self, x):\n"
                                "    y = self.conv.forward(x).mean([2, 3])\n"
                                "    return self.fc.forward(self.fc.forward(y))\n",
                                {}, {{"conv", t::conv_module({"conv2d", 4, 8, 3, 1, 1, 1, true})},
                                     {"fc", t::linear_module(8, 8)}});
        m.eval();
        return ipex::quant::prepare_for_quantization(m);
    }();
    return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const nlohmann::json j = ipex::parse_json(text, "fuzz.json");
        if (!ipex::quant::is_ipex_summary(j)) return 0;
        const ipex::quant::QConfig config = ipex::quant::qconfig_from_ipex_summary(j, prepared(), "fuzz.json");
        for (const auto &op : config.ops) {
            if (!(op.input.scale > 0 && std::isfinite(op.input.scale))) __builtin_trap();
            if (!(op.output.scale > 0 && std::isfinite(op.output.scale))) __builtin_trap();
            if (op.weight.scales.empty()) __builtin_trap();
        }
        const auto again = ipex::quant::parse_qconfig(ipex::quant::qconfig_to_json(config).dump(), "again.json");
        if (again.ops.size() != config.ops.size()) __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    return 0;
}
