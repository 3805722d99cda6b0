#include "quant/qconfig.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "quant/json_reader.h"

namespace ipex::quant {
namespace {

using nlohmann::json;
using ipex::quant::detail::Reader;
using ipex::quant::detail::read_observer;

double positive_scale(const Reader &r, const char *field, double value) {
    if (!std::isfinite(value) || value <= 0.0)
        r.fail(field, "must be a finite number > 0 (got " + json(value).dump() + ")");
    return value;
}

TensorQ read_tensor(const Reader &r) {
    TensorQ t;
    const std::string dtype = r.str("dtype");
    if (!parse_qdtype_name(dtype, t.dtype)) r.fail("dtype", "'" + dtype + "' is not u8 or s8");
    t.scale = positive_scale(r, "scale", r.number("scale"));
    t.zero_point = r.integer("zero_point");
    if (t.zero_point < qmin(t.dtype) || t.zero_point > qmax(t.dtype))
        r.fail("zero_point", std::to_string(t.zero_point) + " is out of range for " + dtype + " [" +
                                 std::to_string(qmin(t.dtype)) + ", " + std::to_string(qmax(t.dtype)) + "]");
    if (r.has("observer")) t.observer = read_observer(r.object("observer"));
    return t;
}

std::vector<double> read_number_array(const Reader &r, const char *field) {
    const json &a = r.get(field);
    if (!a.is_array()) r.fail(field, "must be an array of numbers (got " + Reader::type_of(a) + ")");
    if (a.empty() || a.size() > kMaxChannels)
        r.fail(field, "must hold 1.." + std::to_string(kMaxChannels) + " numbers (got " +
                          std::to_string(a.size()) + ")");
    std::vector<double> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_number()) r.fail(std::string(field) + "[" + std::to_string(i) + "]", "must be a number");
        out.push_back(a[i].get<double>());
    }
    return out;
}

WeightQ read_weight(const Reader &r) {
    WeightQ w;
    const std::string dtype = r.str("dtype");
    if (dtype != "s8") r.fail("dtype", "'" + dtype + "' is not supported for weights (only s8)");
    if (r.has("scheme") && r.str("scheme") != "per_channel_symmetric")
        r.fail("scheme", "'" + r.str("scheme") + "' is not supported (only per_channel_symmetric)");
    w.scales = read_number_array(r, "scales");
    for (size_t i = 0; i < w.scales.size(); ++i)
        positive_scale(r, ("scales[" + std::to_string(i) + "]").c_str(), w.scales[i]);
    if (r.has("channels")) {
        const int64_t channels = r.integer("channels");
        if (channels != static_cast<int64_t>(w.scales.size()))
            r.fail("scales", "holds " + std::to_string(w.scales.size()) + " scales but channels is " +
                                 std::to_string(channels));
    }
    if (r.has("zero_points")) {
        const std::vector<double> zps = read_number_array(r, "zero_points");
        if (zps.size() != w.scales.size())
            r.fail("zero_points", "holds " + std::to_string(zps.size()) + " entries for " +
                                      std::to_string(w.scales.size()) + " scales");
        for (size_t i = 0; i < zps.size(); ++i)
            if (zps[i] != 0.0)
                r.fail("zero_points[" + std::to_string(i) + "]",
                       "must be 0: weights are symmetric int8 (got " + json(zps[i]).dump() + ")");
    }
    return w;
}

OpConfig read_op(const json &j, size_t index, const std::string &where) {
    const std::string path = "ops[" + std::to_string(index) + "]";
    Reader base(j, where, path);
    OpConfig op;
    op.id = base.str("id");
    if (op.id.empty() || op.id.size() > 4096) base.fail("id", "must be a non-empty string of at most 4096 bytes");
    // From here on errors also name the op id.
    const Reader r(j, where, path + " (op '" + op.id + "')");
    op.module = r.str("module");
    op.kind = r.str("kind");
    bool known = false;
    for (const auto &k : quantizable_kinds()) known |= k == op.kind;
    if (!known) r.fail("kind", "'" + op.kind + "' is not a quantizable op kind");
    op.dtype = r.str("dtype");
    if (!is_op_dtype(op.dtype)) r.fail("dtype", "'" + op.dtype + "' must be int8, fp32 or bf16");
    op.input = read_tensor(r.object("input"));
    op.output = read_tensor(r.object("output"));
    op.weight = read_weight(r.object("weight"));
    if (r.has("relu")) {
        if (!r.get("relu").is_boolean()) r.fail("relu", "must be true or false");
        op.relu = r.get("relu").get<bool>();
    }
    if (r.has("add")) {
        const Reader add = r.object("add");
        AddQ a;
        a.other = read_tensor(add.object("other"));
        a.output = read_tensor(add.object("output"));
        if (add.has("relu")) {
            if (!add.get("relu").is_boolean()) add.fail("relu", "must be true or false");
            a.relu = add.get("relu").get<bool>();
        }
        op.add = a;
    }
    if (r.has("smooth_quant")) {
        const Reader sq = r.object("smooth_quant");
        op.smooth_factors = read_number_array(sq, "factors");
        for (size_t i = 0; i < op.smooth_factors.size(); ++i)
            positive_scale(sq, ("factors[" + std::to_string(i) + "]").c_str(), op.smooth_factors[i]);
    }
    return op;
}

json observer_json(const ObserverParams &p) {
    json j = {{"name", observer_name(p.kind)}};
    if (p.kind == ObserverKind::moving_average) j["averaging_constant"] = p.averaging_constant;
    if (p.kind == ObserverKind::histogram_l2 || p.kind == ObserverKind::histogram_kl ||
        p.kind == ObserverKind::percentile)
        j["bins"] = p.bins;
    if (p.kind == ObserverKind::percentile) j["percentile"] = p.percentile;
    return j;
}

json tensor_json(const TensorQ &t) {
    json j = {{"dtype", qdtype_name(t.dtype)}, {"scale", t.scale}, {"zero_point", t.zero_point}};
    if (t.observer) j["observer"] = observer_json(*t.observer);
    return j;
}

}  // namespace

const std::vector<std::string> &quantizable_kinds() {
    static const std::vector<std::string> kinds = {"conv1d", "conv2d", "conv3d", "linear", "matmul"};
    return kinds;
}

bool is_op_dtype(const std::string &dtype) { return dtype == "int8" || dtype == "fp32" || dtype == "bf16"; }

const OpConfig *QConfig::find(const std::string &id) const {
    for (const auto &op : ops)
        if (op.id == id) return &op;
    return nullptr;
}

QConfig parse_qconfig(const std::string &text, const std::string &where) {
    const json j = parse_json(text, where, "a qconfig is the JSON file 'ipex-tool calibrate' writes");
    const Reader r(j, where, "");
    QConfig config;
    const std::string format = r.str("format");
    if (format != kQConfigFormat)
        r.fail("format", "is '" + format + "', not '" + kQConfigFormat + "'");
    const int64_t version = r.integer("version");
    if (version != kQConfigVersion)
        r.fail("version", std::to_string(version) + " is not supported (this ipex-tool reads version " +
                              std::to_string(kQConfigVersion) + ")");
    const Reader model = r.object("model");
    config.identity = model.str("identity");
    if (config.identity.empty()) model.fail("identity", "must not be empty");
    if (model.has("source")) config.source = model.str("source");
    if (r.has("recipe")) {
        if (!r.get("recipe").is_object()) r.fail("recipe", "must be an object");
        config.recipe = r.get("recipe");
    }
    if (r.has("smooth_quant")) {
        const Reader sq = r.object("smooth_quant");
        const double alpha = sq.number("alpha");
        if (!(alpha >= 0.0 && alpha <= 1.0)) sq.fail("alpha", "must be in [0, 1]");
        config.smooth_quant_alpha = alpha;
    }
    const json &ops = r.get("ops");
    if (!ops.is_array()) r.fail("ops", "must be an array (got " + Reader::type_of(ops) + ")");
    if (ops.size() > kMaxQConfigOps) r.fail("ops", "holds more than " + std::to_string(kMaxQConfigOps) + " ops");
    std::set<std::string> ids;
    for (size_t i = 0; i < ops.size(); ++i) {
        OpConfig op = read_op(ops[i], i, where);
        if (!ids.insert(op.id).second)
            throw_bad_input(where + ": ops[" + std::to_string(i) + "] (op '" + op.id +
                            "') id appears twice; each op is listed once");
        config.ops.push_back(std::move(op));
    }
    return config;
}

QConfig load_qconfig(const std::string &path) {
    check_input_file(path, "qconfig");
    return parse_qconfig(read_bounded_file(path, kMaxQConfigBytes, "qconfig"), path);
}

json qconfig_to_json(const QConfig &config) {
    json j = {{"format", kQConfigFormat}, {"version", config.version},
              {"model", {{"identity", config.identity}, {"source", config.source}}}};
    j["recipe"] = config.recipe;
    if (config.smooth_quant_alpha) j["smooth_quant"] = {{"alpha", *config.smooth_quant_alpha}};
    json ops = json::array();
    for (const auto &op : config.ops) {
        json o = {{"id", op.id}, {"module", op.module}, {"kind", op.kind}, {"dtype", op.dtype},
                  {"input", tensor_json(op.input)}};
        o["weight"] = {{"dtype", "s8"}, {"scheme", "per_channel_symmetric"},
                       {"channels", op.weight.scales.size()}, {"scales", op.weight.scales}};
        o["output"] = tensor_json(op.output);
        o["relu"] = op.relu;
        if (op.add)
            o["add"] = {{"other", tensor_json(op.add->other)}, {"output", tensor_json(op.add->output)},
                        {"relu", op.add->relu}};
        if (!op.smooth_factors.empty()) o["smooth_quant"] = {{"factors", op.smooth_factors}};
        ops.push_back(std::move(o));
    }
    j["ops"] = std::move(ops);
    return j;
}

}  // namespace ipex::quant
