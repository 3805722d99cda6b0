#include "model/compare.h"

#include <ATen/ATen.h>

#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/tensor_spec.h"

namespace ipex::model {
namespace {

constexpr double kRelFloor = 1e-3;  // relative error is measured against at least 1e-3*max|a|

std::string join(const std::string &prefix, const std::string &key) {
    return prefix.empty() ? key : prefix + "." + key;
}

void flatten_into(const c10::IValue &v, const std::string &path,
                  std::vector<std::pair<std::string, c10::IValue>> &out) {
    if (v.isTuple()) {
        const auto &elements = v.toTupleRef().elements();
        for (size_t i = 0; i < elements.size(); ++i) flatten_into(elements[i], join(path, std::to_string(i)), out);
    } else if (v.isList()) {
        const auto list = v.toListRef();
        for (size_t i = 0; i < list.size(); ++i) flatten_into(list[i], join(path, std::to_string(i)), out);
    } else if (v.isGenericDict()) {
        for (const auto &entry : v.toGenericDict()) {
            std::ostringstream key;
            key << entry.key();
            flatten_into(entry.value(), join(path, key.str()), out);
        }
    } else {
        out.emplace_back(path, v);
    }
}

OutputDiff compare_tensors(const std::string &name, const at::Tensor &a_in, const at::Tensor &b_in,
                           const Tolerance &tol) {
    OutputDiff d;
    d.name = name;
    d.shape = a_in.sizes().vec();
    if (a_in.sizes() != b_in.sizes()) {
        d.ok = false;
        std::ostringstream msg;
        msg << "shape differs: " << a_in.sizes() << " vs " << b_in.sizes();
        d.problem = msg.str();
        return d;
    }
    const bool floating = at::isFloatingType(a_in.scalar_type()) || at::isFloatingType(b_in.scalar_type());
    const at::Tensor a = a_in.to(at::kDouble).contiguous();
    const at::Tensor b = b_in.to(at::kDouble).contiguous();
    if (a.numel() == 0) return d;
    const at::Tensor diff = (a - b).abs();
    d.max_abs_err = diff.max().item<double>();
    const double ref_max = a.abs().max().item<double>();
    const at::Tensor denom = at::clamp_min(a.abs(), std::max(kRelFloor * ref_max, 1e-30));
    d.max_rel_err = (diff / denom).max().item<double>();
    const double na = a.norm().item<double>(), nb = b.norm().item<double>();
    if (na == 0.0 && nb == 0.0) d.cosine = 1.0;
    else if (na == 0.0 || nb == 0.0) d.cosine = 0.0;
    else d.cosine = (a * b).sum().item<double>() / (na * nb);
    if (std::isnan(d.max_abs_err) || std::isnan(d.cosine)) {
        // NaN in one output but not the other is a mismatch; NaN in the same places is not.
        const bool same_nan = at::equal(at::isnan(a), at::isnan(b));
        const at::Tensor mask = at::isnan(a).logical_not();
        if (same_nan && mask.any().item<bool>()) {
            OutputDiff clean = compare_tensors(name, a.masked_select(mask), b.masked_select(mask), tol);
            clean.shape = d.shape;
            d = clean;
        } else if (!same_nan) {
            d.ok = false;
            d.problem = "NaN in different places";
            return d;
        }
    }
    if (a.dim() == 2 && a.size(1) > 1) {
        d.argmax_agreement = a.argmax(1).eq(b.argmax(1)).to(at::kDouble).mean().item<double>();
    }
    if (!floating) {
        d.ok = d.max_abs_err == 0.0;
        if (!d.ok) d.problem = "integer output differs";
        return d;
    }
    d.ok = d.cosine >= tol.min_cosine;
    if (tol.atol || tol.rtol) {
        const double atol = tol.atol.value_or(0.0), rtol = tol.rtol.value_or(0.0);
        const bool close = (diff <= atol + rtol * a.abs()).all().item<bool>();
        d.ok = d.ok && close;
    }
    return d;
}

}  // namespace

Tolerance default_tolerance(const std::string &dtype) {
    Tolerance t;
    if (dtype == "int8") t.min_cosine = 0.99;  // static int8 activations (quantize, optimize --qconfig)
    else if (dtype == "bf16" || dtype == "fp16") t.min_cosine = 0.999;
    else t.min_cosine = 0.99999;
    return t;
}

std::vector<std::pair<std::string, c10::IValue>> flatten_outputs(const c10::IValue &value) {
    std::vector<std::pair<std::string, c10::IValue>> out;
    flatten_into(value, "", out);
    return out;
}

std::vector<OutputDiff> compare_outputs(const c10::IValue &a, const c10::IValue &b, const Tolerance &tol) {
    const auto fa = flatten_outputs(a), fb = flatten_outputs(b);
    std::vector<OutputDiff> diffs;
    if (fa.size() != fb.size()) {
        OutputDiff d;
        d.name = "(structure)";
        d.ok = false;
        d.problem = "output structure differs: " + std::to_string(fa.size()) + " vs " +
                    std::to_string(fb.size()) + " leaves";
        diffs.push_back(d);
        return diffs;
    }
    for (size_t i = 0; i < fa.size(); ++i) {
        const auto &[name, va] = fa[i];
        const auto &vb = fb[i].second;
        if (fb[i].first != name) {
            OutputDiff d;
            d.name = name;
            d.ok = false;
            d.problem = "output names differ: '" + name + "' vs '" + fb[i].first + "'";
            diffs.push_back(d);
        } else if (va.isTensor() && vb.isTensor()) {
            diffs.push_back(compare_tensors(name, va.toTensor(), vb.toTensor(), tol));
        } else {
            OutputDiff d;
            d.name = name;
            std::ostringstream sa, sb;
            sa << va;
            sb << vb;
            d.ok = va.tagKind() == vb.tagKind() && sa.str() == sb.str();
            if (!d.ok) d.problem = "non-tensor output differs: " + sa.str() + " vs " + sb.str();
            diffs.push_back(d);
        }
    }
    return diffs;
}

nlohmann::json diffs_to_json(const std::vector<OutputDiff> &diffs, const Tolerance &tol,
                             const std::string &dtype) {
    nlohmann::json outputs = nlohmann::json::array();
    bool ok = true;
    for (const auto &d : diffs) {
        ok = ok && d.ok;
        nlohmann::json o = {{"name", d.name},
                            {"shape", d.shape},
                            {"max_abs_err", d.max_abs_err},
                            {"max_rel_err", d.max_rel_err},
                            {"cosine", d.cosine},
                            {"argmax_agreement", d.argmax_agreement ? nlohmann::json(*d.argmax_agreement)
                                                                    : nlohmann::json(nullptr)},
                            {"ok", d.ok}};
        if (!d.problem.empty()) o["problem"] = d.problem;
        outputs.push_back(o);
    }
    nlohmann::json t = {{"min_cosine", tol.min_cosine},
                        {"atol", tol.atol ? nlohmann::json(*tol.atol) : nlohmann::json(nullptr)},
                        {"rtol", tol.rtol ? nlohmann::json(*tol.rtol) : nlohmann::json(nullptr)}};
    return {{"ok", ok}, {"dtype", dtype}, {"tolerance", t}, {"outputs", outputs}};
}

std::string format_diffs(const std::vector<OutputDiff> &diffs, const Tolerance &tol) {
    std::ostringstream out;
    out << std::left << std::setw(14) << "output" << std::setw(18) << "shape" << std::setw(13)
        << "max_abs" << std::setw(13) << "max_rel" << std::setw(12) << "cosine" << std::setw(9)
        << "argmax" << "status\n";
    for (const auto &d : diffs) {
        out << std::left << std::setw(14) << (d.name.empty() ? "output" : d.name) << std::setw(18)
            << format_sizes(d.shape) << std::setw(13) << std::setprecision(4) << d.max_abs_err << std::setw(13)
            << d.max_rel_err << std::setw(12) << std::setprecision(7) << d.cosine << std::setw(9)
            << (d.argmax_agreement ? std::to_string(static_cast<int>(std::lround(*d.argmax_agreement * 100))) + "%"
                                   : std::string("-"))
            << (d.ok ? "ok" : "FAIL") << (d.problem.empty() ? "" : " (" + d.problem + ")") << "\n";
    }
    out << "tolerance: cosine >= " << tol.min_cosine;
    if (tol.atol || tol.rtol)
        out << ", |a-b| <= " << tol.atol.value_or(0.0) << " + " << tol.rtol.value_or(0.0) << "*|a|";
    out << "\n";
    return out.str();
}

}  // namespace ipex::model
