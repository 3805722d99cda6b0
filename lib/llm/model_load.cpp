// Model::load: reads config.json (or a GGUF file's metadata), checks every tensor the architecture needs (name, rank,
// shape) before converting anything, then converts the weights once (merged q/k/v and
// gate/up, prepacked or weight-only).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "base/errors.h"
#include "base/isa.h"
#include "base/log.h"
#include "llm/limits.h"
#include "llm/model.h"
#include "llm/tensor_source.h"
#include "llm/text_model_source.h"
#include "llm/w8a8_config.h"
#include "ops/cpu_allocator.h"
#include "ops/ops.h"
#include "checkpoint/import_checkpoint.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/woq_format.h"

namespace ipex::llm {
namespace {

std::string shape_str(const std::vector<int64_t> &shape) {
    std::ostringstream s;
    s << "[";
    for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
    s << "]";
    return s.str();
}

// One projection the architecture needs: dense `<name>.weight` [out, in] (+ bias) or a
// quantized layer `<name>` of the same features.
struct Projection {
    std::string name;
    int64_t out = 0, in = 0;
    bool bias = false;
};

// A layer's projections as the checkpoint stores them: q, k, v and gate, up apart, or fused
// (qkv_proj rows q | k | v, gate_up_proj rows gate | up: the order the merged Linears use).
struct LayerProjections {
    std::vector<Projection> qkv, o, gate_up, down;

    std::vector<Projection> all() const {
        std::vector<Projection> out;
        for (const auto *part : {&qkv, &o, &gate_up, &down}) out.insert(out.end(), part->begin(), part->end());
        return out;
    }
};

LayerProjections projections(const ModelConfig &c, int64_t layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t h = c.hidden_size, i = c.intermediate_size;
    LayerProjections l;
    if (c.fused_projections) {
        l.qkv = {{p + "self_attn.qkv_proj", q + 2 * kv, h, c.attention_bias}};
        l.gate_up = {{p + "mlp.gate_up_proj", 2 * i, h, c.mlp_bias}};
    } else {
        l.qkv = {{p + "self_attn.q_proj", q, h, c.attention_bias}, {p + "self_attn.k_proj", kv, h, c.attention_bias},
                 {p + "self_attn.v_proj", kv, h, c.attention_bias}};
        l.gate_up = {{p + "mlp.gate_proj", i, h, c.mlp_bias}, {p + "mlp.up_proj", i, h, c.mlp_bias}};
    }
    l.o = {{p + "self_attn.o_proj", h, q, c.o_bias}};
    l.down = {{p + "mlp.down_proj", h, i, c.mlp_bias}};
    if (c.sparse(layer)) {
        l.gate_up.clear();
        l.down.clear();
    }
    return l;
}

// A sparse layer's experts as the family names them: gate/up/down projections of each
// expert, the router, the shared expert and its gate.
struct ExpertNames {
    std::string router;
    std::vector<std::vector<Projection>> gate_up, down;
    std::vector<Projection> shared_gate_up, shared_down;
    std::string shared_gate;  // "" without a shared expert
};

ExpertNames expert_names(const ModelConfig &c, int64_t layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const int64_t h = c.hidden_size, i = c.moe_intermediate_size;
    ExpertNames n;
    const bool mixtral = c.family == "mixtral";
    const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
    n.router = block + "gate.weight";
    for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = block + "experts." + std::to_string(e) + ".";
        if (mixtral) {  // w1 gate, w3 up, w2 down
            n.gate_up.push_back({{x + "w1", i, h, false}, {x + "w3", i, h, false}});
            n.down.push_back({{x + "w2", h, i, false}});
        } else {
            n.gate_up.push_back({{x + "gate_proj", i, h, false}, {x + "up_proj", i, h, false}});
            n.down.push_back({{x + "down_proj", h, i, false}});
        }
    }
    if (c.shared_expert_intermediate_size > 0) {
        const int64_t s = c.shared_expert_intermediate_size;
        n.shared_gate_up = {{block + "shared_expert.gate_proj", s, h, false}, {block + "shared_expert.up_proj", s, h, false}};
        n.shared_down = {{block + "shared_expert.down_proj", h, s, false}};
        n.shared_gate = block + "shared_expert_gate.weight";
    }
    return n;
}

class Loader {
public:
    Loader(const std::string &dir, const ModelConfig &config, bool gguf, bool gguf_dequantize)
        : dir_(dir), config_(config), ck_(gguf ? gguf_source(dir) : safetensors_source(dir)),
          gguf_(gguf), gguf_woq_(gguf && !gguf_dequantize) {
        if (gguf) return;  // GGUF q4_0 .. q6_K projections load weight-only (build_gguf), the rest dense
        if (config.text_of_multimodal) ck_ = text_model_source(std::move(ck_));
        const auto qc = woq::detect_quant_config(dir);
        if (qc && (qc->method == "gptq" || qc->method == "awq" || qc->bits > 0)) {
            woq::ImportResult imported = woq::load_low_precision_checkpoint(dir);
            quantized_ = std::move(imported.checkpoint.layers);
            method_ = qc->method.empty() ? imported.summary.value("method", std::string("gptq")) : qc->method;
            bits_ = qc->bits;
        } else if (config.quantized) {
            throw_unsupported("'" + dir + "/config.json': its quantization_config is neither GPTQ nor AWQ (supported: "
                              "gptq, awq)");
        }
    }

    bool quantized(const std::string &name) const { return quantized_.count(name) != 0; }
    const std::string &method() const { return method_; }
    int bits() const { return bits_; }  // of a GPTQ/AWQ checkpoint (0: not stated)
    bool any_quantized() const { return !quantized_.empty(); }
    // A GGUF projection stored in a type held weight-only (checkpoint/gguf_woq.h: q6_K converted).
    bool stored_woq(const std::string &name) const { return gguf_woq_ && ck_->stored_woq(name); }
    bool gguf_woq() const { return gguf_woq_; }
    // Whether build() may run for several projections at once: dense safetensors sources are
    // read-only views and copies (no GPTQ/AWQ layer taken from the map, no GGUF tally).
    bool concurrent_builds() const { return !gguf_ && quantized_.empty(); }
    std::optional<woq::WoqLayer> stored_layer(const Projection &p) const {
        std::optional<woq::WoqLayer> l = ck_->woq_layer(p.name);
        if (l && p.bias) l->bias = ck_->tensor(p.name + ".bias").to(at::kFloat).contiguous();
        return l;
    }
    std::string dtype(const std::string &name) const { return ck_->dtype(name); }

    void check_tensor(const std::string &name, const std::vector<int64_t> &shape) const {
        if (!ck_->has(name))
            throw_bad_input("'" + dir_ + "': tensor '" + name + "' is missing (" + config_.architecture + " with " +
                            std::to_string(config_.num_layers) + " layers needs it; is the checkpoint complete?)");
        if (ck_->shape(name) != shape)
            throw_bad_input("'" + dir_ + "': tensor '" + name + "' has shape " + shape_str(ck_->shape(name)) +
                            ", config.json implies " + shape_str(shape));
        if (!ck_->readable(name))
            throw_bad_input("'" + dir_ + "': tensor '" + name + "' has dtype " + ck_->dtype(name) +
                            " (expected F32, BF16 or F16, or a GGUF type: q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, "
                            "q6_K)");
    }

    void check_projection(const Projection &p) const {
        if (quantized(p.name)) {
            const auto &l = quantized_.at(p.name);
            if (l.out_features != p.out || l.in_features != p.in)
                throw_bad_input("'" + dir_ + "': quantized layer '" + p.name + "' is " + std::to_string(l.in_features) +
                                "->" + std::to_string(l.out_features) + ", config.json implies " +
                                std::to_string(p.in) + "->" + std::to_string(p.out));
            return;
        }
        check_tensor(p.name + ".weight", {p.out, p.in});
        if (p.bias) check_tensor(p.name + ".bias", {p.out});
    }

    at::Tensor tensor(const std::string &name) const { return ck_->tensor(name); }
    at::Tensor view(const std::vector<std::string> &names) const { return ck_->view(names); }
    woq::WoqLayer take(const std::string &name) {
        woq::WoqLayer l = std::move(quantized_.at(name));
        quantized_.erase(name);
        return l;
    }

private:
    std::string dir_;
    const ModelConfig &config_;
    std::unique_ptr<TensorSource> ck_;
    std::map<std::string, woq::WoqLayer> quantized_;
    std::string method_;
    int bits_ = 0;
    bool gguf_ = false, gguf_woq_ = false;
};

// Freed memory back to the system: the blocks the ops' CPU cache holds, then the heap's free pages.
void release_free_memory() {
    if (ops::CachingCpuAllocator *cache = ops::installed_cpu_cache()) cache->release_cached();
    ::malloc_trim(0);
}

// After a part quantized on load, its freed source: the cached blocks always, the heap's pages
// only after a large part (TinyLlama's int4 load peaks 35 MiB higher without them). malloc_trim
// walks the heap, and a MoE layer has hundreds of small expert parts: those wait for the layer's.
void release_after_part(int64_t source_numel) {
    constexpr int64_t kTrimBytes = int64_t{8} << 20;
    if (source_numel * 4 >= kTrimBytes) {
        release_free_memory();
    } else if (ops::CachingCpuAllocator *cache = ops::installed_cpu_cache()) {
        cache->release_cached();
    }
}

// What the GGUF projections became: weight-only "int4 g32 (q4_0)", "int8 g32 (q6_K, converted)"
// and so on, or "dense (q5_0)".
using LoadTally = std::map<std::string, int64_t>;

// What a GGUF tensor held weight-only became: "int4 g32 (q4_0)", "int8 g32 (q6_K, converted)" (a
// layer whose source groups differ from its kernel groups was converted).
std::string stored_kind(const Loader &loader, const std::string &module, const woq::WoqLayer &l) {
    const bool converted = l.source_group_size != l.group_size;
    return "int" + std::to_string(l.bits) + " g32 (" + loader.dtype(module + ".weight") +
           (converted ? ", converted" : "") + ")";
}

// A GGUF projection: weight-only as stored when every part is a type held weight-only (q4_0,
// q4_1, q8_0, q4_K, q5_K exactly, q6_K converted to int8 g32); the parts keep their own bits
// (a merged q/k/v of int4 q and k and an int8 v runs as three parts: Linear::from_woq stacks
// only parts of one layout). Otherwise dense (dequantized), or with --woq-dtype the other parts
// quantized on load beside the stored ones.
Linear build_gguf(Loader &loader, const std::string &name, const std::vector<Projection> &parts,
                  const WeightFormat &format, LoadTally &tally) {
    std::vector<woq::WoqLayer> layers;
    const bool all_stored = std::all_of(parts.begin(), parts.end(), [&](const Projection &p) { return loader.stored_woq(p.name); });
    if (all_stored || format.woq_bits != 0) {
        std::vector<std::string> kinds;
        for (const auto &p : parts) {
            std::optional<woq::WoqLayer> l = loader.stored_woq(p.name) ? loader.stored_layer(p) : std::nullopt;
            if (!l && format.woq_bits == 0) break;  // a block not held: the whole projection dense
            if (l) {
                kinds.push_back(stored_kind(loader, p.name, *l));
                layers.push_back(std::move(*l));
                continue;
            }
            at::Tensor b = p.bias ? loader.tensor(p.name + ".bias") : at::Tensor();
            at::Tensor w = loader.tensor(p.name + ".weight");
            const int64_t numel = w.numel();
            layers.push_back(Linear::quantize(p.name, w, b, format));
            kinds.push_back("quantized on load (" + loader.dtype(p.name + ".weight") + ")");
            w = at::Tensor();
            release_after_part(numel);
        }
        if (layers.size() == parts.size()) {
            for (const auto &k : kinds) ++tally[k];
            return Linear::from_woq(name, std::move(layers), format.lowp_mode);
        }
        layers.clear();
    }
    std::vector<at::Tensor> weights, biases;
    for (const auto &p : parts) {
        ++tally["dense (" + loader.dtype(p.name + ".weight") + ")"];
        weights.push_back(loader.tensor(p.name + ".weight"));
        biases.push_back(p.bias ? loader.tensor(p.name + ".bias") : at::Tensor());
    }
    return Linear::from_dense(name, weights, biases, format);
}

// A GGUF model's weights in words: "int4/int8 g32 (lowp fp32; GGUF projections: 154 int4 g32
// (q4_0), 1 int8 g32 (q6_K, converted))", or `dense` (the dtype) when no projection runs
// weight-only.
std::string gguf_description(const LoadTally &tally, const std::string &dense, const std::string &lowp) {
    bool int4 = false, int8 = false;
    std::string parts;
    for (const auto &[kind, count] : tally) {
        int4 |= kind.rfind("int4", 0) == 0;
        int8 |= kind.rfind("int8", 0) == 0;
        parts += (parts.empty() ? "" : ", ") + std::to_string(count) + " " + kind;
    }
    if (!int4 && !int8) return dense;
    return std::string(int4 && int8 ? "int4/int8" : int4 ? "int4" : "int8") + " g32 (lowp " + lowp +
           "; GGUF projections: " + parts + ")";
}

// Merges projections that read the same input into one Linear.
Linear build(Loader &loader, const std::string &name, const std::vector<Projection> &parts, const WeightFormat &format,
             LoadTally &tally) {
    if (parts.empty()) return Linear();  // a sparse layer's dense MLP
    if (loader.gguf_woq()) return build_gguf(loader, name, parts, format, tally);
    if (loader.quantized(parts[0].name)) {
        std::vector<woq::WoqLayer> layers;
        for (const auto &p : parts) {
            if (!loader.quantized(p.name))
                throw_unsupported("layer '" + p.name + "' is not quantized but '" + parts[0].name +
                                  "' is; mixed projections are not supported");
            layers.push_back(loader.take(p.name));
        }
        return Linear::from_woq(name, std::move(layers), format.lowp_mode);
    }
    // Dense in the math dtype, read in place (format.mapped, the default): the weight is a view
    // of the mapped file, one of all the parts where they are stored one after another (o_proj,
    // down_proj, and in most files gate_proj with up_proj), else one a part, multiplied where it
    // lies. Nothing is copied, the load only maps the pages; decode then streams the page
    // cache's 4 KiB pages (bench/RESULTS.md: up to 16% slower than from huge pages, which
    // --no-mmap copies into at a load of about a second per 2 GB on the machine measured).
    const at::ScalarType math = format.math_type();
    if (format.mapped && format.woq_bits == 0 && !format.w8a8) {
        std::vector<std::string> names;
        for (const auto &p : parts) names.push_back(p.name + ".weight");
        const auto in_math = [math](const at::Tensor &t) { return t.defined() && t.scalar_type() == math; };
        std::vector<at::Tensor> in_place;
        if (parts.size() > 1) {
            const at::Tensor all = loader.view(names);
            if (in_math(all)) in_place = {all};
        }
        if (in_place.empty())
            for (const auto &name_of_part : names) {
                const at::Tensor v = loader.view({name_of_part});
                if (!in_math(v)) {
                    in_place.clear();
                    break;
                }
                in_place.push_back(v);
            }
        // Mapped now, as llama.cpp maps its file with MAP_POPULATE: a decode step then takes no
        // page fault (a mixture's experts would otherwise fault in over its first tokens).
        for (const at::Tensor &v : in_place) woq::populate_mapped_pages(v.data_ptr(), v.nbytes());
        if (!in_place.empty()) {
            std::vector<at::Tensor> biases;
            std::vector<int64_t> rows;
            for (const auto &p : parts) {
                biases.push_back(p.bias ? loader.tensor(p.name + ".bias") : at::Tensor());
                rows.push_back(p.out);
            }
            // One view of all the parts takes their biases stacked; parts take one each.
            return Linear::from_dense(name, in_place,
                                      in_place.size() > 1 ? biases : std::vector<at::Tensor>{Linear::stacked_bias(biases, rows)},
                                      format);
        }
    }
    // Otherwise part by part, each read from a view of the mapped file where the source gives one
    // (converted, stacked or quantized straight from the mapped pages, which are then released
    // from the resident set), else from a copy.
    std::vector<at::Tensor> views;
    const auto release_views = [&views] {
        for (const auto &v : views) woq::release_mapped_pages(v.data_ptr(), v.nbytes());
        views.clear();
    };
    std::vector<at::Tensor> weights, biases;
    std::vector<woq::WoqLayer> quantized;
    // int4 held in the tiled layout alone: every part's source quantized straight into it by
    // Linear::from_dense.
    const bool tiled = Linear::int4_tiled_only(format);
    for (const auto &p : parts) {
        if (loader.quantized(p.name))
            throw_unsupported("layer '" + p.name + "' is quantized but '" + parts[0].name +
                              "' is not; mixed projections are not supported");
        at::Tensor w = loader.view({p.name + ".weight"});
        if (w.defined()) views.push_back(w);
        else w = loader.tensor(p.name + ".weight");
        at::Tensor b = p.bias ? loader.tensor(p.name + ".bias") : at::Tensor();
        // Quantized part by part, each source freed before the next is read: the load holds
        // one part's source at a time beside the packed weights.
        if (format.woq_bits != 0 && !tiled) {
            const int64_t numel = w.numel();
            quantized.push_back(Linear::quantize(p.name, w, b, format));
            w = at::Tensor();
            release_views();
            release_after_part(numel);
        } else {
            weights.push_back(std::move(w));
            biases.push_back(std::move(b));
        }
    }
    if (format.woq_bits != 0 && !tiled) return Linear::from_woq(name, std::move(quantized), format.lowp_mode);
    // A lone part in the math dtype would be held as its view: copied, since its pages are
    // released below (several are concatenated, other dtypes converted, int4 and W8A8 quantized).
    if (weights.size() == 1 && !views.empty() && weights[0].scalar_type() == math && format.woq_bits == 0 &&
        !format.w8a8)
        weights[0] = weights[0].clone();
    Linear built = Linear::from_dense(name, weights, biases, format);
    weights.clear();
    release_views();
    return built;
}

// yarn: per frequency, a blend of the unscaled one (above beta_fast rotations over the original
// length) and the one divided by factor (below beta_slow), linear in between.
std::vector<float> yarn_frequencies(const ModelConfig &c) {
    const RopeScaling &r = c.rope_scaling;
    const double dim = static_cast<double>(c.rotary_dim), base = c.rope_theta;
    const double original = static_cast<double>(r.original_max_position_embeddings);
    const auto correction_dim = [&](double rotations) {
        return dim * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(base));
    };
    double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
    if (r.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
    std::vector<float> inv(static_cast<size_t>(c.rotary_dim / 2));
    for (size_t i = 0; i < inv.size(); ++i) {
        const double extrapolated = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);
        const double interpolated = extrapolated / r.factor;
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double keep = 1 - ramp;  // the share of the unscaled frequency
        inv[i] = static_cast<float>(interpolated * (1 - keep) + extrapolated * keep);
    }
    return inv;
}

// The rotation's frequencies [rotary_dim / 2]; for longrope, those of short runs (`long_run`
// false) or long ones.
std::vector<float> rope_frequencies(const ModelConfig &c, bool long_run) {
    std::vector<float> inv(static_cast<size_t>(c.rotary_dim / 2));
    const RopeScaling &r = c.rope_scaling;
    if (r.type == "yarn") return yarn_frequencies(c);
    for (size_t i = 0; i < inv.size(); ++i) {
        double f = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(c.rotary_dim));
        if (r.type == "longrope") {
            f /= (long_run ? r.long_factor : r.short_factor)[i];
        } else if (r.type == "linear") {
            f /= r.factor;
        } else if (r.type == "llama3") {
            const double old = static_cast<double>(r.original_max_position_embeddings);
            const double low_wavelen = old / r.low_freq_factor, high_wavelen = old / r.high_freq_factor;
            const double wavelen = 2 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= r.factor;
            } else if (wavelen >= high_wavelen) {
                const double smooth = (old / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
                f = (1 - smooth) * f / r.factor + smooth * f;
            }
        }
        inv[i] = static_cast<float>(f);
    }
    return inv;
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string &dir, const LoadOptions &options) {
    if (options.dtype != "bf16" && options.dtype != "fp32")
        throw_usage("--dtype must be bf16 or fp32, got '" + options.dtype + "'");
    if (options.woq_bits != 0 && options.woq_bits != 4 && options.woq_bits != 8)
        throw_usage("--woq-dtype must be int4 or int8");
    if (options.lowp_mode != "auto" && options.lowp_mode != "fp32" && options.lowp_mode != "bf16" &&
        options.lowp_mode != "int8")
        throw_usage("--lowp-mode must be auto, fp32, bf16 or int8, got '" + options.lowp_mode + "'");
    std::shared_ptr<Model> m(new Model());
    m->dir_ = dir;
    const bool gguf = is_gguf(dir);  // a GGUF file where a directory is expected
    m->config_ = read_config(dir);
    m->generation_ = read_generation_defaults(dir, m->config_);
    check_generation_ids(m->generation_, m->config_, dir + "/generation_config.json");
    const ModelConfig &c = m->config_;
    Loader loader(dir, c, gguf, options.gguf_dequantize);
    if (c.text_of_multimodal)
        log::info("'" + dir + "' is " + c.architecture + ": its text model runs, the vision tower is not loaded");
    if (loader.any_quantized() && options.woq_bits != 0)
        throw_usage("'" + dir + "' is already a " + loader.method() + " checkpoint; drop --woq-dtype");
    std::map<std::string, W8A8Spec> w8a8;  // SmoothQuant: per projection, checked before any weight is read
    if (!options.qconfig.empty()) {
        if (options.woq_bits != 0) throw_usage("--qconfig (W8A8) and --woq-dtype exclude each other; drop one");
        if (loader.any_quantized())
            throw_usage("'" + dir + "' is a " + loader.method() + " checkpoint; --qconfig (W8A8) needs dense weights");
        w8a8 = read_w8a8_config(options.qconfig, c);
    }

    // Validate everything first.
    const int64_t h = c.hidden_size;
    loader.check_tensor("model.embed_tokens.weight", {c.vocab_size, h});
    loader.check_tensor("model.norm.weight", {h});
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        loader.check_tensor(p + "input_layernorm.weight", {h});
        loader.check_tensor(p + "post_attention_layernorm.weight", {h});
        if (c.gemma_norms) {
            loader.check_tensor(p + "pre_feedforward_layernorm.weight", {h});
            loader.check_tensor(p + "post_feedforward_layernorm.weight", {h});
        }
        if (c.qk_norm) {
            loader.check_tensor(p + "self_attn.q_norm.weight", {c.head_dim});
            loader.check_tensor(p + "self_attn.k_norm.weight", {c.head_dim});
        }
        for (const auto &proj : projections(c, l).all()) loader.check_projection(proj);
        if (c.qk_norm_full) {
            loader.check_tensor(p + "self_attn.q_norm.weight", {c.num_heads * c.head_dim});
            loader.check_tensor(p + "self_attn.k_norm.weight", {c.num_kv_heads * c.head_dim});
        }
        if (c.sparse(l)) {
            const ExpertNames n = expert_names(c, l);
            loader.check_tensor(n.router, {c.num_experts, h});
            for (int64_t e = 0; e < c.num_experts; ++e)
                for (const auto *parts : {&n.gate_up[static_cast<size_t>(e)], &n.down[static_cast<size_t>(e)]})
                    for (const auto &proj : *parts) loader.check_projection(proj);
            for (const auto &proj : n.shared_gate_up) loader.check_projection(proj);
            for (const auto &proj : n.shared_down) loader.check_projection(proj);
            if (!n.shared_gate.empty()) loader.check_tensor(n.shared_gate, {1, h});
        }
    }
    const Projection head{c.tie_word_embeddings ? "model.embed_tokens" : "lm_head", c.vocab_size, h, false};
    if (!c.tie_word_embeddings) loader.check_projection(head);

    // oneDNN 2.6 has bf16 linears only on AVX-512 CPUs: elsewhere bf16 runs as fp32, said once.
    std::string dtype = options.dtype, why;
    if (dtype == "bf16" && !ops::dtype_supported("bf16", &why)) {
        static std::once_flag said;  // once per process (perplexity --baseline loads twice)
        std::call_once(said, [] {
            log::warn("--dtype bf16: this CPU has no bf16 linear in oneDNN (it needs AVX-512); dense weights, "
                      "activations and the KV cache are fp32");
        });
        dtype = "fp32";
    }
    WeightFormat format;
    format.dtype = dtype;
    format.woq_bits = options.woq_bits;
    format.group_size = options.group_size;
    format.mapped = options.mmap;
    format.lowp_mode = woq::resolve_lowp_mode(options.lowp_mode, options.dtype, woq::LowpAuto::bf16_model_best_dot,
                                              options.woq_bits ? options.woq_bits : loader.bits());
    m->cache_type_ = dtype == "fp32" ? kernels::CacheType::f32 : kernels::CacheType::bf16;
    std::ostringstream desc;
    if (loader.any_quantized()) desc << loader.method() << " (lowp " << format.lowp_mode << ")";
    else if (options.woq_bits) desc << "int" << options.woq_bits << " g"
                                 << (options.group_size == 0 ? std::string("128") : std::to_string(options.group_size))
                                 << " (lowp " << format.lowp_mode << ")";
    else if (!w8a8.empty()) desc << "w8a8 smoothquant (int8 per-tensor activations, int8 per-channel weights; "
                                 << dtype << " elsewhere)";
    else desc << dtype;
    m->description_ = desc.str();
    // A decoder projection's format: W8A8 where the qconfig names it, observed when calibrating.
    const auto layer_format = [&](const std::string &name) {
        WeightFormat f = format;
        f.observe = options.observe;
        const auto it = w8a8.find(name);
        if (it != w8a8.end()) f.w8a8 = &it->second;
        return f;
    };

    LoadTally tally;  // GGUF projections by what they became
    // A GGUF embedding of a type held weight-only stays as stored (q4_0 as int4 g32: 0.75 byte a
    // value, where the dequantized table took 4), its rows dequantized on lookup.
    const Projection embedding{"model.embed_tokens", c.vocab_size, h, false};
    if (loader.stored_woq(embedding.name)) m->embed_woq_ = loader.stored_layer(embedding);
    // The embedding's rows are read a few a token: in place from the mapped file where it can.
    else m->embed_ = loader.view({"model.embed_tokens.weight"});
    const bool embed_viewed = m->embed_.defined();
    if (!m->embed_woq_ && !embed_viewed) m->embed_ = loader.tensor("model.embed_tokens.weight");
    // RMSNorm weights in fp32; Gemma stores w - 1.
    const auto norm = [&](const std::string &name) {
        at::Tensor w = loader.tensor(name).to(at::kFloat).contiguous();
        return c.gemma_norms ? (w + 1).contiguous() : w;
    };
    if (c.gemma_norms)  // the scale as Hugging Face applies it: a number of the embedding's dtype
        m->embed_scale_ = at::scalar_tensor(std::sqrt(static_cast<double>(h)),
                                            m->embed_woq_ ? at::kFloat : m->embed_.scalar_type()).item<float>();
    m->final_norm_ = norm("model.norm.weight");
    // The head first: its conversion's temporaries (the largest single weight) then meet the
    // smallest resident set of the load.
    if (c.tie_word_embeddings && m->embed_woq_) {  // one weight-only copy: the tensors are shared
        m->lm_head_ = Linear::from_woq("lm_head", {*m->embed_woq_}, format.lowp_mode);
        ++tally[stored_kind(loader, embedding.name, *m->embed_woq_)];
    } else if (c.tie_word_embeddings) {
        // The one tensor shared, read in place where the weights are (see build()); else the
        // head's own copy of the mapped embedding (converted, or cloned in the same dtype).
        const bool copy = embed_viewed && !format.mapped &&
                          m->embed_.scalar_type() == format.math_type();
        m->lm_head_ = Linear::from_dense("lm_head", {copy ? m->embed_.clone() : m->embed_}, {}, format);
    } else {
        m->lm_head_ = build(loader, "lm_head", {head}, format, tally);
    }
    release_free_memory();
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const auto proj = projections(c, l);
        log::verbose("converting layer " + std::to_string(l));
        DecoderLayer &layer = m->layers_.emplace_back();
        layer.qkv = build(loader, p + "self_attn.qkv_proj", proj.qkv, layer_format(p + "self_attn.qkv_proj"), tally);
        layer.o = build(loader, p + "self_attn.o_proj", proj.o, layer_format(p + "self_attn.o_proj"), tally);
        layer.gate_up = build(loader, p + "mlp.gate_up_proj", proj.gate_up, layer_format(p + "mlp.gate_up_proj"), tally);
        layer.down = build(loader, p + "mlp.down_proj", proj.down, layer_format(p + "mlp.down_proj"), tally);
        layer.input_norm = norm(p + "input_layernorm.weight");
        layer.post_norm = norm(p + (c.gemma_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"));
        if (!w8a8.empty()) {  // 1/s of q/k/v and gate/up folded into the norms whose outputs they read
            layer.input_norm = (layer.input_norm / w8a8.at(p + "self_attn.qkv_proj").smooth).contiguous();
            layer.post_norm = (layer.post_norm / w8a8.at(p + "mlp.gate_up_proj").smooth).contiguous();
        }
        if (c.sparse(l)) {
            const ExpertNames n = expert_names(c, l);
            auto experts = std::make_shared<Experts>();
            experts->router = loader.tensor(n.router).to(at::kFloat).t().contiguous();
            // Experts quantized on load are built side by side, whole experts to each thread:
            // one small expert's product split over the threads cost a fork, a join and its
            // serial steps (allocation, releasing its source pages) per projection.
            experts->gate_up.resize(static_cast<size_t>(c.num_experts));
            experts->down.resize(static_cast<size_t>(c.num_experts));
            const auto build_expert = [&](int64_t e) {
                const std::string x = p + "experts." + std::to_string(e) + ".";
                const auto i = static_cast<size_t>(e);
                experts->gate_up[i] = build(loader, x + "gate_up_proj", n.gate_up[i], format, tally);
                experts->down[i] = build(loader, x + "down_proj", n.down[i], format, tally);
            };
            if (format.woq_bits != 0 && loader.concurrent_builds())
                at::parallel_for(0, c.num_experts, 1, [&](int64_t e0, int64_t e1) {
                    for (int64_t e = e0; e < e1; ++e) build_expert(e);
                });
            else
                for (int64_t e = 0; e < c.num_experts; ++e) build_expert(e);
            if (!n.shared_gate.empty()) {
                experts->shared_gate_up = build(loader, p + "shared_expert.gate_up_proj", n.shared_gate_up, format, tally);
                experts->shared_down = build(loader, p + "shared_expert.down_proj", n.shared_down, format, tally);
                experts->shared_gate = loader.tensor(n.shared_gate).to(at::kFloat).reshape({h}).contiguous();
            }
            layer.experts = std::move(experts);
        }
        // The layer's source copies and temporaries are freed; give them back (the ops' block
        // cache keeps freed blocks otherwise, and the heap its free pages) so the resident set
        // grows by the converted weights alone.
        release_free_memory();
        if (c.qk_norm || c.qk_norm_full) {
            layer.q_norm = norm(p + "self_attn.q_norm.weight");
            layer.k_norm = norm(p + "self_attn.k_norm.weight");
        }
        if (c.gemma_norms) {
            layer.attn_out_norm = norm(p + "post_attention_layernorm.weight");
            layer.mlp_out_norm = norm(p + "post_feedforward_layernorm.weight");
        }
    }
    if (loader.gguf_woq()) m->description_ = gguf_description(tally, m->description_, format.lowp_mode);
    m->inv_freq_ = rope_frequencies(c, false);
    if (c.rope_scaling.type == "longrope") m->inv_freq_long_ = rope_frequencies(c, true);
    if (c.rope_local_theta > 0) {  // Gemma 3's sliding layers: their own base, no scaling
        ModelConfig local = c;
        local.rope_theta = c.rope_local_theta;
        local.rope_scaling = RopeScaling{};
        m->inv_freq_local_ = rope_frequencies(local, false);
    }
    return m;
}

uint64_t Model::weight_bytes_per_token() const {
    const uint64_t embed_row = embed_woq_ ? embed_woq_->bytes() / static_cast<uint64_t>(config_.vocab_size)
                                          : static_cast<uint64_t>(config_.hidden_size) * embed_.element_size();
    uint64_t bytes = lm_head_.weight_bytes() + embed_row;
    for (const auto &l : layers_) {
        bytes += l.qkv.weight_bytes() + l.o.weight_bytes() + l.gate_up.weight_bytes() + l.down.weight_bytes();
        if (!l.experts) continue;
        // A token reads the router, its experts_per_token experts (the mean expert's bytes) and
        // the shared expert.
        const Experts &x = *l.experts;
        uint64_t all = 0;
        for (size_t e = 0; e < x.gate_up.size(); ++e) all += x.gate_up[e].weight_bytes() + x.down[e].weight_bytes();
        bytes += static_cast<uint64_t>(x.router.nbytes()) + x.shared_gate_up.weight_bytes() + x.shared_down.weight_bytes() +
                 all / x.gate_up.size() * static_cast<uint64_t>(config_.experts_per_token);
    }
    return bytes;
}

uint64_t Model::embedding_bytes() const {
    return embed_woq_ ? embed_woq_->bytes() : static_cast<uint64_t>(embed_.nbytes());
}

at::Tensor Model::embed(const at::Tensor &ids) const {
    if (embed_woq_) return woq::dequantize_rows(*embed_woq_, ids).contiguous();
    return embed_.index_select(0, ids).to(at::kFloat).contiguous();
}

std::string Model::layer_description(int64_t layer) const {
    TORCH_CHECK(layer >= 0 && layer < static_cast<int64_t>(layers_.size()), "no decoder layer ", layer);
    const DecoderLayer &l = layers_[static_cast<size_t>(layer)];
    std::string s;
    for (const Linear *p : {&l.qkv, &l.o, &l.gate_up, &l.down})
        if (p->out_features() > 0) s += (s.empty() ? "" : "; ") + p->describe();
    return s;
}

uint64_t Model::resident_weight_bytes() const {
    const auto t = [](const at::Tensor &x) { return x.defined() ? static_cast<uint64_t>(x.nbytes()) : uint64_t(0); };
    // A weight-only table a tied head shares is in the head's bytes already.
    const bool shared = embed_woq_ && config_.tie_word_embeddings;
    uint64_t bytes = (shared ? 0 : embedding_bytes()) + t(final_norm_) + lm_head_.resident_bytes();
    for (const auto &l : layers_) {
        for (const Linear *p : {&l.qkv, &l.o, &l.gate_up, &l.down}) bytes += p->resident_bytes();
        for (const at::Tensor *n : {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm, &l.attn_out_norm, &l.mlp_out_norm})
            bytes += t(*n);
        if (!l.experts) continue;
        const Experts &x = *l.experts;
        bytes += t(x.router) + t(x.shared_gate) + x.shared_gate_up.resident_bytes() + x.shared_down.resident_bytes();
        for (size_t e = 0; e < x.gate_up.size(); ++e) bytes += x.gate_up[e].resident_bytes() + x.down[e].resident_bytes();
    }
    return bytes;
}

double Model::prefill_flops(int64_t tokens) const {
    double params = 0;
    const auto size = [](const Linear &p) { return static_cast<double>(p.in_features()) * static_cast<double>(p.out_features()); };
    for (const auto &l : layers_) {
        for (const Linear *p : {&l.qkv, &l.o, &l.gate_up, &l.down}) params += size(*p);
        if (!l.experts) continue;
        const Experts &x = *l.experts;  // each token through experts_per_token experts
        double experts = 0;
        for (size_t e = 0; e < x.gate_up.size(); ++e) experts += size(x.gate_up[e]) + size(x.down[e]);
        params += static_cast<double>(x.router.numel()) + size(x.shared_gate_up) + size(x.shared_down) +
                  experts / static_cast<double>(x.gate_up.size()) * static_cast<double>(config_.experts_per_token);
    }
    const double t = static_cast<double>(tokens);
    const double attention = 2.0 * static_cast<double>(config_.num_layers * config_.num_heads * config_.head_dim) * t * t;
    return 2.0 * params * t + attention + 2.0 * static_cast<double>(lm_head_.in_features() * lm_head_.out_features());
}

}  // namespace ipex::llm
