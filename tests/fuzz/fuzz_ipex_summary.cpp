// Fuzz target: IPEX's qconfig summary read against a small model (a conv, then a linear called
// twice) turns any byte string into a valid qconfig of ours or a bad-input error (exit 3),
// never a crash; what it accepts passes our own qconfig loader. The same bytes go to the LLM
// W8A8 reader (ours or IPEX's LLM summary, llm/w8a8_ipex_summary.h) for a 2-layer decoder
// (hidden 8, 2 heads of 4, intermediate 16): specs for every projection with finite factors > 0
// and a step > 0, or exit 3 / exit 4 (a projection kept in float, parts smoothed differently).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "base/json_io.h"
#include "base/log.h"
#include "llm/config.h"
#include "llm/w8a8_config.h"
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

const ipex::llm::ModelConfig &llm_config() {
    static const ipex::llm::ModelConfig c = [] {
        ipex::llm::ModelConfig m;
        m.architecture = "LlamaForCausalLM";
        m.hidden_size = 8;
        m.intermediate_size = 16;
        m.num_layers = 2;
        m.num_heads = 2;
        m.num_kv_heads = 2;
        m.head_dim = 4;
        return m;
    }();
    return c;
}

void check_llm_reader(const nlohmann::json &j) {
    try {
        const auto specs = ipex::llm::w8a8_config_from_json(j, llm_config(), "fuzz.json");
        if (specs.size() != 8) __builtin_trap();
        for (const auto &[name, s] : specs) {
            if (!(s.act_scale > 0 && std::isfinite(s.act_scale))) __builtin_trap();
            if (s.smooth.numel() == 0 || !(s.smooth.min().item<float>() > 0) || !s.smooth.isfinite().all().item<bool>())
                __builtin_trap();
        }
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const nlohmann::json j = ipex::parse_json(text, "fuzz.json");
        check_llm_reader(j);
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
