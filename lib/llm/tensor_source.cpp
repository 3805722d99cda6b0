#include "llm/tensor_source.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "base/errors.h"
#include "checkpoint/gguf.h"
#include "checkpoint/gguf_woq.h"
#include "checkpoint/safetensors.h"
#include "llm/gguf_names.h"

namespace ipex::llm {
namespace {

class Safetensors final : public TensorSource {
public:
    explicit Safetensors(const std::string &path) : ck_(path) {}
    bool has(const std::string &name) const override { return ck_.has(name); }
    std::vector<int64_t> shape(const std::string &name) const override { return ck_.info(name).shape; }
    std::string dtype(const std::string &name) const override { return ck_.info(name).dtype; }
    bool readable(const std::string &name) const override {
        const at::ScalarType t = ck_.info(name).type;
        return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
    }
    at::Tensor tensor(const std::string &name) const override { return ck_.tensor(name); }
    at::Tensor view(const std::vector<std::string> &names) const override { return ck_.view(names); }

private:
    woq::Checkpoint ck_;
};

// A metadata integer by key, or `fallback`.
int64_t md_int(const nlohmann::json &md, const std::string &key, int64_t fallback) {
    const auto it = md.find(key);
    return it != md.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string shape_text(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// Every tensor of the file has a Hugging Face name of its architecture (exit 4 naming one that
// does not: a vision tower, a projector or another part this decoder does not run), expert
// stacks hold expert_count experts, and each layer with a router has its experts and, where the
// file states a shared expert size, the shared expert and its gate (exit 3 naming the tensor).
void check_gguf_tensors(const woq::GgufFile &file, const std::string &arch) {
    const auto &md = file.metadata();
    const std::string &path = file.path();
    const int64_t experts = md_int(md, arch + ".expert_count", 0);
    for (const auto &t : file.header().tensors) {
        if (is_rope_table(t.name)) continue;
        const std::vector<std::string> hf = gguf_hf_names(arch, t.name, std::max<int64_t>(experts, 1));
        if (hf.empty() || gguf_slot(arch, hf[0]).tensor != t.name)
            throw_unsupported("GGUF file '" + path + "': tensor '" + t.name + "' is not part of the " + arch +
                              " decoder this loader runs (a vision tower, projector or other part is not supported; "
                              "a file converted from the text model alone loads)");
        if (!is_expert_stack(t.name)) continue;
        if (experts <= 0)
            throw_bad_input("GGUF file '" + path + "': tensor '" + t.name + "' stacks experts but '" + arch +
                            ".expert_count' is not set");
        if (t.shape.size() != 3 || t.shape[0] != experts)
            throw_bad_input("GGUF file '" + path + "': tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                            ", not [" + std::to_string(experts) + " experts, rows, columns] ('" + arch +
                            ".expert_count' = " + std::to_string(experts) + ")");
    }
    const int64_t shared = md_int(md, arch + ".expert_shared_feed_forward_length", 0);
    const int64_t layers = md_int(md, arch + ".block_count", 0);
    for (int64_t l = 0; l < layers && experts > 0; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        if (!file.find(p + "ffn_gate_inp.weight")) continue;  // a dense layer
        std::vector<std::string> parts = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
        if (shared > 0) parts.insert(parts.end(), {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp_shexp"});
        for (const auto &part : parts)
            if (!file.find(p + part + ".weight"))
                throw_bad_input("GGUF file '" + path + "': tensor '" + p + part + ".weight' is missing (layer " +
                                std::to_string(l) + " has a router, ffn_gate_inp" +
                                (part.find("shexp") != std::string::npos
                                     ? ", and '" + arch + ".expert_shared_feed_forward_length' is " + std::to_string(shared)
                                     : std::string()) +
                                ")");
    }
}

class Gguf final : public TensorSource {
public:
    explicit Gguf(const std::string &path) : file_(path) {
        const auto &md = file_.metadata();
        gguf_hf_architecture(md, path);  // exit 4 for an architecture without a mapping
        arch_ = md.value("general.architecture", std::string());
        if (arch_ == "llama") {  // llama.cpp's converter interleaves q/k rows for this architecture
            heads_ = md_int(md, "llama.attention.head_count", 0);
            kv_heads_ = md_int(md, "llama.attention.head_count_kv", heads_);
        }
        gemma_ = arch_ == "gemma2" || arch_ == "gemma3";
        check_gguf_tensors(file_, arch_);
    }
    bool has(const std::string &name) const override { return info(name) != nullptr; }
    std::vector<int64_t> shape(const std::string &name) const override {
        const GgufSlot slot = gguf_slot(arch_, name);
        const auto *t = file_.find(slot.tensor);
        if (slot.expert >= 0) return {t->shape.begin() + 1, t->shape.end()};
        if (t->shape.size() == 1 && ends_with(name, "shared_expert_gate.weight")) return {1, t->shape[0]};
        return t->shape;
    }
    std::string dtype(const std::string &name) const override { return woq::ggml_type_name(info(name)->type); }
    bool readable(const std::string &name) const override {
        using T = woq::GgmlType;
        switch (static_cast<T>(info(name)->type)) {
        case T::f32: case T::f16: case T::bf16: case T::q8_0: case T::q4_0: case T::q4_1: case T::q5_0:
        case T::q5_1: case T::q4_k: case T::q5_k: case T::q6_k: return true;
        default: return false;
        }
    }
    at::Tensor tensor(const std::string &name) const override {
        const GgufSlot slot = gguf_slot(arch_, name);
        at::Tensor t = slot.expert >= 0 ? file_.tensor(slot.tensor, slot.expert) : file_.tensor(slot.tensor);
        const std::vector<int64_t> order = qk_row_order(name, slot.tensor, t.dim() == 2 ? t.size(0) : 0);
        if (!order.empty()) t = t.index_select(0, at::tensor(order, at::kLong)).contiguous();
        // llama.cpp's converter stores Gemma's norms as 1 + w; Hugging Face keeps w.
        if (gemma_ && ends_with(name, "norm.weight")) t = t.to(at::kFloat) - 1;
        if (t.dim() == 1 && ends_with(name, "shared_expert_gate.weight")) t = t.reshape({1, t.size(0)});
        return t;
    }
    bool stored_woq(const std::string &module) const override {
        const woq::GgufTensorInfo *t = info(module + ".weight");
        return t && woq::ggml_woq_held(t->type) && shape(module + ".weight").size() == 2;
    }
    std::optional<woq::WoqLayer> woq_layer(const std::string &module) const override {
        const std::string name = module + ".weight";
        const GgufSlot slot = gguf_slot(arch_, name);
        const std::vector<int64_t> order = qk_row_order(name, slot.tensor, shape(name)[0]);
        return file_.woq_layer(slot.tensor, slot.expert, module, order.empty() ? nullptr : &order);
    }

private:
    static bool ends_with(const std::string &s, const std::string &tail) {
        return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
    }
    // The "llama" architecture's q/k rows, (head, pair, 2) in the file, back in rotate-half
    // order (head, 2, half): for each output row its row in the file; empty for other tensors.
    std::vector<int64_t> qk_row_order(const std::string &name, const std::string &tensor, int64_t rows) const {
        const bool q = ends_with(name, "self_attn.q_proj.weight");
        const bool k = ends_with(name, "self_attn.k_proj.weight");
        if (!(q || k) || heads_ <= 0) return {};
        const int64_t heads = q ? heads_ : kv_heads_;
        if (heads <= 0 || rows % (2 * heads) != 0)
            throw_bad_input("GGUF file '" + file_.path() + "': '" + tensor + "' has " + std::to_string(rows) +
                            " rows, not whole pairs of " + std::to_string(heads) + " heads");
        const int64_t per_head = rows / heads, half = per_head / 2;
        std::vector<int64_t> order(static_cast<size_t>(rows));
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t a = 0; a < 2; ++a)
                for (int64_t p = 0; p < half; ++p) order[static_cast<size_t>(h * per_head + a * half + p)] = h * per_head + 2 * p + a;
        return order;
    }
    const woq::GgufTensorInfo *info(const std::string &name) const {
        const GgufSlot slot = gguf_slot(arch_, name);
        if (slot.tensor.empty()) return nullptr;
        const auto *t = file_.find(slot.tensor);
        if (t && slot.expert >= 0 && (t->shape.size() != 3 || slot.expert >= t->shape[0])) return nullptr;
        return t;
    }
    woq::GgufFile file_;
    std::string arch_;
    bool gemma_ = false;
    int64_t heads_ = 0, kv_heads_ = 0;
};

}  // namespace

std::unique_ptr<TensorSource> safetensors_source(const std::string &path) { return std::make_unique<Safetensors>(path); }

bool is_gguf(const std::string &path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

std::unique_ptr<TensorSource> gguf_source(const std::string &path) { return std::make_unique<Gguf>(path); }

std::vector<std::string> gguf_tensor_names(const std::string &path) {
    const woq::GgufFile file(path);
    gguf_hf_architecture(file.metadata(), path);
    const std::string arch = file.metadata().value("general.architecture", std::string());
    check_gguf_tensors(file, arch);
    const int64_t experts = md_int(file.metadata(), arch + ".expert_count", 0);
    std::vector<std::string> names;
    for (const auto &t : file.header().tensors) {
        if (is_rope_table(t.name)) continue;  // derived from the config's rope scaling
        for (auto &hf : gguf_hf_names(arch, t.name, experts)) names.push_back(std::move(hf));
    }
    return names;
}

}  // namespace ipex::llm
