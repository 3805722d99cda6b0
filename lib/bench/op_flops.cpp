#include "bench/op_flops.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "core/tensor_spec.h"
#include "ops/conv_context.h"
#include "ops/conv_graph_op.h"
#include "ops/linear_context.h"
#include "ops/rnn_context.h"
#include "ops/int8/int8_context.h"
#include "ops/int8/int8_graph.h"

namespace ipex::bench {
namespace {

int64_t product(c10::IntArrayRef v, size_t from = 0, size_t to = SIZE_MAX) {
    to = std::min(to, v.size());
    int64_t p = 1;
    for (size_t i = from; i < to; ++i) p *= v[i];
    return p;
}

// The value of a per-spatial-dim parameter list for dim i (a single value applies to all).
int64_t param_at(const std::vector<int64_t> &values, size_t i, int64_t fallback) {
    if (values.empty()) return fallback;
    return values.size() == 1 ? values[0] : values.at(i);
}


bool is_int8_op(const std::string &name) { return name == "ipex::int8_op" || name == "ipex::int8_op_sum"; }

// ipex::int8_conv_max_pool(input, ctx, kernel_size, stride, padding, dilation, ceil_mode).
bool is_int8_conv_pool(const std::string &name, c10::ArrayRef<const c10::IValue> in) {
    return name == "ipex::int8_conv_max_pool" && in.size() == 7 && in[1].isCustomClass();
}

std::string dtype_name(at::ScalarType t) {
    switch (t) {
    case at::kFloat: return "fp32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    case at::kQUInt8:
    case at::kQInt8:
    case at::kChar:
    case at::kByte: return "int8";
    case at::kDouble: return "fp64";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kBool: return "bool";
    default: return c10::toString(t);
    }
}

std::string context_dtype(const std::string &dtype) { return dtype == ops::kBf32ToBf16 ? "bf32" : dtype; }

std::vector<int64_t> sizes_of(const c10::IValue &v) {
    return v.isTensor() ? v.toTensor().sizes().vec() : std::vector<int64_t>{};
}

std::vector<int64_t> ints_of(const c10::IValue &v) { return v.isIntList() ? v.toIntVector() : std::vector<int64_t>{}; }

// aten convolutions: (input, weight, bias, ...) with the parameters where each schema has them.
OpWork aten_conv(const std::string &name, c10::ArrayRef<const c10::IValue> in) {
    OpWork w{OpKind::kConvolution, dtype_name(in[0].toTensor().scalar_type()), 0};
    if (in.size() < 7 || !in[1].isTensor()) return w;
    ConvShape c;
    c.input = sizes_of(in[0]);
    c.weight = sizes_of(in[1]);
    c.stride = ints_of(in[3]);
    if (name.rfind("aten::conv_transpose", 0) == 0) {  // its FLOPs follow from the input positions
        c.transposed = true;
    } else if (name == "aten::convolution" || name == "aten::_convolution") {
        c.padding = ints_of(in[4]);
        c.dilation = ints_of(in[5]);
        c.transposed = in[6].isBool() && in[6].toBool();
        c.output_padding = ints_of(in[7]);
    } else {  // conv1d/2d/3d: stride, padding (ints or 'same'/'valid'), dilation, groups
        if (in[4].isString()) c.padding_same = in[4].toStringRef() == "same";
        else c.padding = ints_of(in[4]);
        c.dilation = ints_of(in[5]);
    }
    w.flops = conv_flops(c);
    return w;
}

OpWork ipex_conv(c10::ArrayRef<const c10::IValue> in) {
    const auto ctx = in.back().toCustomClass<ops::ConvolutionContext>();
    return {OpKind::kConvolution, context_dtype(ctx->dtype()), ctx->flops(sizes_of(in[0]))};
}

// ipex::convolution_chain(input, contexts) or ipex::convolution_max_pool(input, contexts, ...).
bool is_chain(const std::string &name, c10::ArrayRef<const c10::IValue> in) {
    return ((name == "ipex::convolution_chain" && in.size() == 2) ||
            (name == "ipex::convolution_max_pool" && in.size() == 7)) &&
           in[1].isList();
}

// A chain's FLOPs: each convolution's at the sizes the one before it gives it (the pooling adds
// none).
OpWork ipex_conv_chain(c10::ArrayRef<const c10::IValue> in) {
    OpWork w{OpKind::kConvolution, dtype_name(in[0].toTensor().scalar_type()), 0};
    std::vector<int64_t> sizes = sizes_of(in[0]);
    bool first = true;
    for (const c10::IValue &item : in[1].toListRef()) {
        if (!item.isCustomClass()) return w;
        const auto ctx = item.toCustomClass<ops::ConvolutionContext>();
        if (sizes.size() != static_cast<size_t>(ctx->spatial_dims() + 2)) return w;
        if (first) w.dtype = context_dtype(ctx->dtype());
        first = false;
        w.flops += ctx->flops(sizes);
        sizes = ctx->output_sizes(sizes);
    }
    return w;
}

// ipex::convolution_graph or ipex::int8_graph(input, contexts, program).
bool is_graph(const std::string &name, c10::ArrayRef<const c10::IValue> in) {
    return (name == "ipex::convolution_graph" || name == "ipex::int8_graph") && in.size() == 3 && in[1].isList() &&
           in[2].isIntList();
}

ops::ConvChain contexts_of(const c10::IValue &list) {
    ops::ConvChain contexts;
    for (const c10::IValue &item : list.toListRef()) contexts.push_back(item.toCustomClass<ops::ConvolutionContext>());
    return contexts;
}

quant::Int8Chain int8_contexts_of(const c10::IValue &list) {
    quant::Int8Chain contexts;
    for (const c10::IValue &item : list.toListRef()) contexts.push_back(item.toCustomClass<quant::Int8Context>());
    return contexts;
}

// An int8 convolution's FLOPs on an input of these sizes.
int64_t int8_conv_flops(const quant::Int8Context &ctx, const std::vector<int64_t> &input) {
    const quant::Int8Params &p = ctx.params();
    return conv_flops(ConvShape{input, ctx.weight_sizes().vec(), p.stride, p.padding, p.dilation, {}, false, false});
}

// A graph op: each convolution's FLOPs at the sizes of the value it reads (the program's own
// sizes); none when the program or the sizes do not fit.
OpWork ipex_graph(const std::string &name, c10::ArrayRef<const c10::IValue> in) {
    const bool int8 = name == "ipex::int8_graph";
    OpWork w{OpKind::kConvolution, int8 ? "int8" : dtype_name(in[0].toTensor().scalar_type()), 0};
    try {
        const std::vector<int64_t> program = in[2].toIntVector();
        const ops::ConvChain floats = int8 ? ops::ConvChain() : contexts_of(in[1]);
        const quant::Int8Chain ints = int8 ? int8_contexts_of(in[1]) : quant::Int8Chain();
        const std::vector<ops::GraphStep> steps = int8 ? quant::int8_steps(ints) : ops::convolution_steps(floats);
        ops::check_graph_program(name.c_str(), steps, program);
        const auto sizes = ops::graph_value_sizes(sizes_of(in[0]), steps, program);
        if (sizes.empty()) return w;
        if (!int8) w.dtype = context_dtype(floats.get(0)->dtype());
        for (size_t k = 0; k < steps.size(); ++k) {
            const std::vector<int64_t> &read = sizes[program[2 * k]];
            w.flops += int8 ? int8_conv_flops(*ints.get(k), read) : floats.get(k)->flops(read);
        }
    } catch (const std::exception &) {
        w.flops = 0;
    }
    return w;
}

OpWork ipex_int8(c10::ArrayRef<const c10::IValue> in) {
    const auto ctx = in.back().toCustomClass<quant::Int8Context>();
    const quant::Int8Params &p = ctx->params();
    const std::vector<int64_t> weight = ctx->weight_sizes().vec();
    if (p.kind == "linear")
        return {OpKind::kLinear, "int8", linear_flops(in[0].toTensor().sizes(), weight.at(1), weight.at(0))};
    return {OpKind::kConvolution, "int8", int8_conv_flops(*ctx, sizes_of(in[0]))};
}

OpWork ipex_rnn(c10::ArrayRef<const c10::IValue> in) {
    const auto ctx = in.back().toCustomClass<ops::RnnContext>();
    const ops::RnnParams &p = ctx->params();
    const auto x = in[0].toTensor().sizes();
    RnnShape r;
    r.lstm = ctx->is_lstm();
    if (x.size() == 3) {
        r.steps = p.batch_first ? x[1] : x[0];
        r.batch = p.batch_first ? x[0] : x[1];
    } else {
        r.steps = x.empty() ? 0 : x[0];
        r.batch = 1;
    }
    r.input_size = p.input_size;
    r.hidden_size = p.hidden_size;
    r.layers = p.num_layers;
    r.bidirectional = p.bidirectional;
    return {OpKind::kRecurrent, context_dtype(ctx->dtype()), rnn_flops(r)};
}

// ipex::woq_linear(input, qweight [N, ...], scales, zeros, bias, perm, bits, group_size, in_features, lowp_mode)
OpWork woq_linear(c10::ArrayRef<const c10::IValue> in) {
    OpWork w{OpKind::kLinear, dtype_name(in[0].toTensor().scalar_type()), 0};
    if (in.size() < 10) return w;
    const std::string lowp = in[9].isString() ? in[9].toStringRef() : "";
    if (lowp == "int8" || lowp == "bf16" || lowp == "fp32") w.dtype = lowp;
    w.flops = linear_flops(in[0].toTensor().sizes(), in[8].toInt(), in[1].toTensor().size(0));
    return w;
}

}  // namespace

int64_t conv_flops(const ConvShape &c) {
    const size_t spatial = c.weight.size() >= 2 ? c.weight.size() - 2 : 0;
    if (spatial == 0 || c.input.size() < spatial + 1) return 0;
    const bool batched = c.input.size() == spatial + 2;
    const int64_t batch = batched ? c.input[0] : 1;
    const size_t first = c.input.size() - spatial;  // first spatial dim of the input
    int64_t positions = 1;  // output positions (transposed: input positions)
    for (size_t i = 0; i < spatial; ++i) {
        const int64_t in = c.input[first + i];
        if (c.transposed || c.padding_same) {
            positions *= in;
            continue;
        }
        const int64_t k = c.weight[2 + i];
        const int64_t s = param_at(c.stride, i, 1), p = param_at(c.padding, i, 0), d = param_at(c.dilation, i, 1);
        positions *= std::max<int64_t>(0, (in + 2 * p - d * (k - 1) - 1) / s + 1);
    }
    // weight [O, I/G, k...] (transposed [I, O/G, k...]): every output (input) position meets all
    // of O * I/G * prod(k) weights once.
    return 2 * batch * positions * product(c.weight);
}

int64_t linear_flops(c10::IntArrayRef input, int64_t in_features, int64_t out_features) {
    if (in_features <= 0 || input.empty()) return 0;
    const int64_t rows = product(input) / in_features;
    return 2 * rows * in_features * out_features;
}

int64_t matmul_flops(c10::IntArrayRef a, c10::IntArrayRef b) {
    if (a.empty() || b.empty()) return 0;
    const int64_t k = a.back();
    if (a.size() == 1 && b.size() == 1) return 2 * k;
    if (b.size() == 1) return 2 * product(a, 0, a.size() - 1) * k;
    const int64_t m = b.back();
    const int64_t n = a.size() == 1 ? 1 : a[a.size() - 2];
    // Batch dims broadcast from the right.
    const size_t a_batch = a.size() > 2 ? a.size() - 2 : 0, b_batch = b.size() - 2;
    int64_t batch = 1;
    for (size_t i = 0; i < std::max(a_batch, b_batch); ++i) {
        const int64_t da = i < a_batch ? a[a_batch - 1 - i] : 1;
        const int64_t db = i < b_batch ? b[b_batch - 1 - i] : 1;
        batch *= std::max(da, db);
    }
    return 2 * batch * n * k * m;
}

int64_t attention_flops(c10::IntArrayRef query, c10::IntArrayRef key, c10::IntArrayRef value) {
    if (query.size() < 2 || key.size() < 2 || value.size() < 2) return 0;
    std::vector<int64_t> kt(key.begin(), key.end());
    std::swap(kt[kt.size() - 1], kt[kt.size() - 2]);
    const int64_t scores = matmul_flops(query, kt);  // 2 * batch * Lq * Lk * D
    const int64_t d = query.back(), dv = value.back();
    return d > 0 ? scores + scores / d * dv : 0;
}

int64_t rnn_flops(const RnnShape &r) {
    const int64_t gates = r.lstm ? 4 : 3, directions = r.bidirectional ? 2 : 1;
    int64_t total = 0;
    for (int64_t layer = 0; layer < r.layers; ++layer) {
        const int64_t in = layer == 0 ? r.input_size : r.hidden_size * directions;
        total += 2 * r.steps * r.batch * gates * r.hidden_size * (in + r.hidden_size) * directions;
    }
    return total;
}

OpWork op_work(const std::string &name, c10::ArrayRef<const c10::IValue> in) {
    const OpKind kind = op_kind(name);
    if (in.empty() || !in[0].isTensor()) return {kind, "", 0};
    if (is_int8_op(name) && in.back().isCustomClass()) return ipex_int8(in);
    if (is_int8_conv_pool(name, in)) return ipex_int8(in.slice(0, 2));
    if (kind == OpKind::kOther) return {kind, dtype_name(in[0].toTensor().scalar_type()), 0};
    const bool ipex = name.rfind("ipex::", 0) == 0;
    if (is_chain(name, in)) return ipex_conv_chain(in);
    if (is_graph(name, in)) return ipex_graph(name, in);
    if (ipex && kind == OpKind::kConvolution && in.back().isCustomClass()) return ipex_conv(in);
    if (ipex && kind == OpKind::kLinear && name != "ipex::woq_linear" && in.back().isCustomClass()) {
        const auto ctx = in.back().toCustomClass<ops::LinearContext>();
        return {kind, context_dtype(ctx->dtype()),
                linear_flops(in[0].toTensor().sizes(), ctx->in_features(), ctx->out_features())};
    }
    if (name == "ipex::woq_linear") return woq_linear(in);
    if (kind == OpKind::kRecurrent && in.back().isCustomClass()) return ipex_rnn(in);
    OpWork w{kind, dtype_name(in[0].toTensor().scalar_type()), 0};
    auto tensor_sizes = [&](size_t i) { return i < in.size() ? sizes_of(in[i]) : std::vector<int64_t>{}; };
    if (kind == OpKind::kConvolution) return aten_conv(name, in);
    if (name == "aten::linear" && in.size() >= 2 && in[1].isTensor()) {
        const auto weight = in[1].toTensor().sizes();
        w.flops = weight.size() == 2 ? linear_flops(in[0].toTensor().sizes(), weight[1], weight[0]) : 0;
    } else if (kind == OpKind::kAttention) {
        w.flops = attention_flops(tensor_sizes(0), tensor_sizes(1), tensor_sizes(2));
    } else if (name == "aten::addmm" || name == "aten::baddbmm") {  // (bias, a, b, ...)
        w.dtype = in.size() > 1 && in[1].isTensor() ? dtype_name(in[1].toTensor().scalar_type()) : w.dtype;
        w.flops = matmul_flops(tensor_sizes(1), tensor_sizes(2));
    } else if (kind == OpKind::kMatmul) {
        w.flops = matmul_flops(tensor_sizes(0), tensor_sizes(1));
    }
    return w;
}

namespace {

void put_sizes(std::ostringstream &out, c10::IntArrayRef sizes) {
    out << (sizes.empty() ? "scalar" : format_sizes(sizes));
}

void put_tensor(std::ostringstream &out, const at::Tensor &t) {
    put_sizes(out, t.sizes());
    if (t.dim() == 4 && !t.is_contiguous() && t.is_contiguous(at::MemoryFormat::ChannelsLast)) out << " [cl]";
    if (t.dim() == 5 && !t.is_contiguous() && t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) out << " [cl]";
}

// " s1 p1 d1": one number when every spatial dim has the same, else "s2,1".
void put_param(std::ostringstream &out, const char *tag, const std::vector<int64_t> &values) {
    if (values.empty()) return;
    const bool same = std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; });
    out << " " << tag;
    if (same) {
        out << values[0];
        return;
    }
    for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
}

// " w 64x16x1x1 s1 p0 d1 g1" of a convolution context.
void put_conv(std::ostringstream &out, const ops::ConvolutionContext &ctx) {
    const ops::ConvParams &p = ctx.params();
    out << " w ";
    put_sizes(out, ctx.weight_sizes());
    put_param(out, "s", p.stride);
    put_param(out, "p", p.padding);
    put_param(out, "d", p.dilation);
    out << " g" << p.groups;
    if (p.transposed) out << " transposed";
}

}  // namespace

std::string op_signature(const std::string &name, c10::ArrayRef<const c10::IValue> inputs) {
    std::ostringstream out;
    bool first = true;
    for (const auto &v : inputs) {
        if (!v.isTensor() || !v.toTensor().defined()) continue;
        if (!first) out << ", ";
        put_tensor(out, v.toTensor());
        first = false;
    }
    if (is_chain(name, inputs)) {
        try {
            const char *between = "";
            for (const c10::IValue &item : inputs[1].toListRef()) {
                out << between;
                put_conv(out, *item.toCustomClass<ops::ConvolutionContext>());
                between = " ->";
            }
            if (inputs.size() == 7) {  // ipex::convolution_max_pool: the pooling's window and stride
                const auto kernel = inputs[2].toIntVector(), stride = inputs[3].toIntVector();
                out << " -> max_pool";
                for (size_t i = 0; i < kernel.size(); ++i) out << (i ? "x" : " ") << kernel[i];
                for (size_t i = 0; i < stride.size(); ++i) out << (i ? "x" : " s") << stride[i];
            }
        } catch (const std::exception &) {
        }
        return out.str();
    }
    if (name == "ipex::int8_graph" && is_graph(name, inputs)) {
        out << " " << inputs[1].toListRef().size() << " int8 convolutions";
        return out.str();
    }
    if (is_graph(name, inputs)) {  // how many convolutions, the first and the last
        try {
            const ops::ConvChain contexts = contexts_of(inputs[1]);
            out << " " << contexts.size() << " convolutions:";
            put_conv(out, *contexts.get(0));
            out << " ..";
            put_conv(out, *contexts.get(contexts.size() - 1));
        } catch (const std::exception &) {
        }
        return out.str();
    }
    const bool pooled = is_int8_conv_pool(name, inputs);  // the context second, the pooling's arguments after it
    if (inputs.empty() || !(pooled ? inputs[1] : inputs.back()).isCustomClass()) return out.str();
    const c10::IValue &context = pooled ? inputs[1] : inputs.back();
    const bool ipex = name.rfind("ipex::", 0) == 0;
    try {
        if (ipex && op_kind(name) == OpKind::kConvolution && !pooled) {
            put_conv(out, *context.toCustomClass<ops::ConvolutionContext>());
        } else if (ipex && op_kind(name) == OpKind::kLinear && name != "ipex::woq_linear") {
            const auto ctx = context.toCustomClass<ops::LinearContext>();
            out << " w " << ctx->out_features() << "x" << ctx->in_features();
        } else if (is_int8_op(name) || pooled) {
            const auto ctx = context.toCustomClass<quant::Int8Context>();
            const quant::Int8Params &p = ctx->params();
            out << " " << p.kind << " w ";
            put_sizes(out, ctx->weight_sizes());
            put_param(out, "s", p.stride);
            put_param(out, "p", p.padding);
            put_param(out, "d", p.dilation);
            if (p.kind != "linear") out << " g" << p.groups;
            if (pooled) {
                out << " -> max_pool";
                put_param(out, "k", inputs[2].toIntVector());
                put_param(out, "s", inputs[3].toIntVector());
            }
        }
    } catch (const std::exception &) {
        // A context of another class under that name: the tensor sizes still say the layer.
    }
    return out.str();
}

}  // namespace ipex::bench
