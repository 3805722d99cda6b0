#include "llm/text_model_source.h"

#include <string>
#include <utility>
#include <vector>

namespace ipex::llm {
namespace {

class TextModelSource final : public TensorSource {
public:
    explicit TextModelSource(std::unique_ptr<TensorSource> checkpoint) : ck_(std::move(checkpoint)) {}
    bool has(const std::string &name) const override { return ck_->has(stored(name)); }
    std::vector<int64_t> shape(const std::string &name) const override { return ck_->shape(stored(name)); }
    std::string dtype(const std::string &name) const override { return ck_->dtype(stored(name)); }
    bool readable(const std::string &name) const override { return ck_->readable(stored(name)); }
    at::Tensor tensor(const std::string &name) const override { return ck_->tensor(stored(name)); }
    at::Tensor view(const std::vector<std::string> &names) const override {
        std::vector<std::string> as_stored;
        for (const auto &name : names) as_stored.push_back(stored(name));
        return ck_->view(as_stored);
    }
    bool stored_woq(const std::string &module) const override { return ck_->stored_woq(stored(module)); }
    std::optional<woq::WoqLayer> woq_layer(const std::string &module) const override {
        return ck_->woq_layer(stored(module));
    }

private:
    // The checkpoint's name of `name`: the first candidate it holds, else the first candidate
    // (so that a missing tensor is named as the published layout would hold it).
    std::string stored(const std::string &name) const {
        std::vector<std::string> candidates;
        if (name.rfind("model.", 0) == 0) {
            const std::string rest = name.substr(6);
            candidates = {"language_model.model." + rest, "model.language_model." + rest};
        } else if (name.rfind("lm_head.", 0) == 0) {
            candidates = {"language_model." + name, name};
        } else {
            return name;
        }
        for (const auto &c : candidates)
            if (ck_->has(c)) return c;
        return candidates.front();
    }

    std::unique_ptr<TensorSource> ck_;
};

}  // namespace

std::unique_ptr<TensorSource> text_model_source(std::unique_ptr<TensorSource> checkpoint) {
    return std::make_unique<TextModelSource>(std::move(checkpoint));
}

}  // namespace ipex::llm
