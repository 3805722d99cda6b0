#include "quant/json_reader.h"

namespace ipex::quant::detail {

ObserverParams read_observer(const Reader &r) {
    ObserverParams p;
    const std::string name = r.str("name");
    if (!parse_observer_name(name, p.kind))
        r.fail("name", "'" + name + "' is not an observer (min_max, moving_average, histogram_l2, "
                       "histogram_kl, percentile)");
    if (r.has("averaging_constant")) {
        p.averaging_constant = r.number("averaging_constant");
        if (!(p.averaging_constant > 0.0 && p.averaging_constant <= 1.0))
            r.fail("averaging_constant", "must be in (0, 1]");
    }
    if (r.has("bins")) {
        const int64_t bins = r.integer("bins");
        if (bins < kMinBins || bins > kMaxBins)
            r.fail("bins", "must be in [" + std::to_string(kMinBins) + ", " + std::to_string(kMaxBins) + "]");
        p.bins = static_cast<int>(bins);
    }
    if (r.has("percentile")) {
        p.percentile = r.number("percentile");
        if (!(p.percentile >= kMinPercentile && p.percentile <= 100.0))
            r.fail("percentile", "must be in [" + std::to_string(int(kMinPercentile)) + ", 100]");
    }
    return p;
}

}  // namespace ipex::quant::detail
