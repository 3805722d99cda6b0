// uint8 row-wise tables in the merged EmbeddingBag: the quantization's error bound (each value
// within scale / 2 of its dequantized one; aten's prepack layout, scale and bias), the merged op
// against an fp64 reference pooled over the dequantized tables (sum and mean, per_sample_weights,
// padding_idx, empty bags, include_last_offset, int32 and int64 indices), aten's
// quantized::embedding_bag_byte_rowwise_offsets on the same tables, the pooled error against the
// fp32 tables within the bound the docs state, and crafted tables refused.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>
#include <vector>

#include "ops/recsys/embedding_bag_kernel.h"
#include "ops/recsys/recsys_ops.h"
#include "recsys_test_utils.h"

namespace ipex::ops::recsys {
namespace {

using namespace testing_recsys;

// The fp32 rounding allowed beside the quantization error, relative to the values involved.
constexpr double kRoundingSlack = 1e-6;

// A uint8 table's scales and biases [rows] (fp64) and its dequantized values [rows, dim] in
// fp64: q * scale + bias with no rounding.
struct Dequantized {
    at::Tensor scale, bias, values;
};

Dequantized dequantize_fp64(const at::Tensor &packed) {
    const int64_t rows = packed.size(0), dim = packed.size(1) - kRowwiseTailBytes;
    Dequantized d{at::empty({rows}, at::kDouble), at::empty({rows}, at::kDouble), at::empty({rows, dim}, at::kDouble)};
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t *row = packed.data_ptr<uint8_t>() + r * packed.size(1);
        float scale = 0.f, bias = 0.f;
        read_row_tail(row, dim, &scale, &bias);
        d.scale[r] = scale;
        d.bias[r] = bias;
        for (int64_t k = 0; k < dim; ++k)
            d.values[r][k] = static_cast<double>(row[k]) * static_cast<double>(scale) + static_cast<double>(bias);
    }
    return d;
}

at::Tensor aten_prepack(const at::Tensor &table) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("quantized::embedding_bag_byte_prepack", "")
                               .typed<at::Tensor(const at::Tensor &)>();
    return op.call(table);
}

// Tables with wide and narrow rows, rows far from 0, a constant row and a one-value row.
std::vector<at::Tensor> odd_tables() {
    std::vector<at::Tensor> tables;
    for (int64_t dim : {1, 7, 16, 33, 128}) tables.push_back(at::randn({9, dim}) * 3);
    at::Tensor shifted = at::randn({4, 20}) + 1000;
    shifted[2].fill_(-7.25);  // constant: scale 0
    tables.push_back(shifted);
    return tables;
}

TEST_F(Recsys, Uint8RowsAreWithinHalfAStepOfTheTable) {
    for (const at::Tensor &table : odd_tables()) {
        const at::Tensor packed = quantize_rows_uint8(table);
        ASSERT_EQ(packed.scalar_type(), at::kByte);
        ASSERT_EQ(packed.size(1), table.size(1) + kRowwiseTailBytes);
        const Dequantized d = dequantize_fp64(packed);
        const at::Tensor x = table.to(at::kDouble);
        // Scale and bias from the row's range; every value within half a step (plus rounding).
        EXPECT_TRUE(at::equal(d.bias, std::get<0>(x.min(1))));
        const at::Tensor range = std::get<0>(x.max(1)) - std::get<0>(x.min(1));
        EXPECT_LE((d.scale - range / 255).abs().max().item<double>(), kRoundingSlack * range.max().item<double>());
        const at::Tensor bound = (d.scale / 2).unsqueeze(1) + kRoundingSlack * (x.abs() + range.unsqueeze(1));
        EXPECT_TRUE((x - d.values).abs().le(bound).all().item<bool>())
            << "dim " << table.size(1) << ": worst " << ((x - d.values).abs() - bound).max().item<double>();
        // The op's own dequantization rounds as the merged op does.
        EXPECT_LE((dequantize_rows_uint8(packed).to(at::kDouble) - d.values).abs().max().item<double>(),
                  kRoundingSlack * x.abs().max().item<double>());
        // aten's prepack: the same layout, scale and bias; a value may sit one level apart (aten
        // divides by the range plus 1e-8).
        const at::Tensor aten = aten_prepack(table);
        ASSERT_EQ(aten.sizes(), packed.sizes());
        const int64_t dim = table.size(1);
        EXPECT_TRUE(at::equal(aten.slice(1, dim), packed.slice(1, dim)));
        EXPECT_LE((aten.slice(1, 0, dim).to(at::kInt) - packed.slice(1, 0, dim).to(at::kInt)).abs().max().item<int>(),
                  1);
    }
}

TEST_F(Recsys, Uint8QuantizationRefusesNonFiniteTables) {
    at::Tensor table = at::randn({3, 4});
    table[1][2] = std::numeric_limits<float>::infinity();
    expect_input_error([&] { quantize_rows_uint8(table); }, "quantize_rows_uint8", "NaN or infinity");
    expect_input_error([&] { quantize_rows_uint8(at::randn({3})); }, "quantize_rows_uint8", "fp32 or bf16 matrix");
}

// Pools a case's bags in fp64 over `values` (aten's embedding_bag in double).
at::Tensor pooled_fp64(const Case &c, const at::Tensor &values, int64_t mode, bool last) {
    Case wide = c;
    wide.weight = values;
    if (c.psw.defined()) wide.psw = c.psw.to(at::kDouble);
    return aten_bag(wide, mode, last);
}

TEST_F(Recsys, MergedEmbeddingBagUint8MatchesAnFp64ReferenceOfTheDequantizedTables) {
    for (int64_t mode : {0, 1}) {
        for (bool last : {false, true}) {
            for (at::ScalarType index : {at::kLong, at::kInt}) {
                std::vector<Case> cases{make_case(11, 8, 7, index, last, mode == 0, -1),
                                        make_case(3, 5, 7, index, last, false, 2),
                                        make_case(40, 17, 3, index, last, mode == 0, 0),
                                        make_case(6, 1, 0, index, last, false, -1),  // an empty batch
                                        make_case(5, 0, 3, index, last, false, -1)};  // rows of no values
                const std::vector<at::Tensor> got = merged(cases, mode, last, c10::nullopt, at::kByte);
                for (size_t t = 0; t < cases.size(); ++t) {
                    const at::Tensor want =
                        pooled_fp64(cases[t], dequantize_fp64(quantize_rows_uint8(cases[t].weight)).values, mode, last);
                    EXPECT_EQ(got[t].scalar_type(), at::kFloat);
                    ASSERT_EQ(got[t].sizes(), want.sizes()) << "table " << t;
                    EXPECT_LE(relative_error(got[t], want), kFp32Tolerance)
                        << "mode " << mode << " last " << last << " table " << t;
                }
            }
        }
    }
    // bf16 outputs when asked for.
    const std::vector<Case> cases{make_case(12, 24, 5, at::kLong, false, false, -1)};
    EXPECT_EQ(merged(cases, 0, false, at::kBFloat16, at::kByte)[0].scalar_type(), at::kBFloat16);
}

// The tables' layout is aten's: its byte op pools our tables as we do (sum; aten has no padding_idx).
TEST_F(Recsys, AtensByteOpPoolsTheSameTables) {
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("quantized::embedding_bag_byte_rowwise_offsets", "")
            .typed<at::Tensor(const at::Tensor &, const at::Tensor &, const c10::optional<at::Tensor> &, bool, int64_t,
                              bool, const c10::optional<at::Tensor> &, const c10::optional<at::Tensor> &, bool)>();
    for (bool weighted : {false, true}) {
        const std::vector<Case> cases{make_case(30, 19, 9, at::kLong, false, weighted, -1)};
        const at::Tensor got = merged(cases, 0, false, c10::nullopt, at::kByte)[0];
        const c10::optional<at::Tensor> psw = weighted ? c10::optional<at::Tensor>(cases[0].psw) : c10::nullopt;
        const at::Tensor want = op.call(quantize_rows_uint8(cases[0].weight), cases[0].indices, cases[0].offsets, false,
                                        0, false, psw, c10::nullopt, false);
        EXPECT_LE(relative_error(got, want), kFp32Tolerance) << "weighted " << weighted;
    }
}

// Against the fp32 tables, each pooled value is within sum_j |w_j| scale_j / 2 over the bag's
// rows j (divided by the count for mean), plus fp32 rounding: the bound docs/kernels.md states.
TEST_F(Recsys, PooledErrorStaysWithinTheStatedBound) {
    for (int64_t mode : {0, 1}) {
        Case c = make_case(50, 64, 40, at::kLong, false, mode == 0, 3);
        c.weight = c.weight * 4 + 2;
        const at::Tensor packed = quantize_rows_uint8(c.weight);
        const at::Tensor got = merged({c}, mode, false, c10::nullopt, at::kByte)[0].to(at::kDouble);
        const at::Tensor want = aten_bag(c, mode, false).to(at::kDouble);
        // The bound per bag: the same pooling over each row's half step (|w|, no padding rows).
        Case steps = c;
        steps.weight = (dequantize_fp64(packed).scale / 2).unsqueeze(1);
        if (c.psw.defined()) steps.psw = c.psw.abs();
        const at::Tensor bound = pooled_fp64(steps, steps.weight, mode, false).to(at::kDouble);
        const at::Tensor slack = kFp32Tolerance * want.abs().max();
        EXPECT_TRUE((got - want).abs().le(bound + slack).all().item<bool>())
            << "mode " << mode << ": worst " << ((got - want).abs() - bound).max().item<double>();
    }
}

TEST_F(Recsys, MergedEmbeddingBagRefusesCraftedUint8Tables) {
    Case c = make_case(10, 4, 4, at::kLong, false, false, -1);
    const auto run = [](const at::Tensor &weight, const at::Tensor &indices, const at::Tensor &offsets) {
        return [=] {
            c10::List<c10::optional<at::Tensor>> psw({c10::nullopt});
            merged_embedding_bag({weight}, {indices}, {offsets}, psw, {-1}, 0, false, c10::nullopt);
        };
    };
    // Too narrow for its scale and bias: mismatched dims.
    expect_input_error(run(at::zeros({10, 5}, at::kByte), c.indices, c.offsets), "merged_embedding_bag",
                       "[rows, dim + 8]");
    const at::Tensor packed = quantize_rows_uint8(c.weight);
    expect_input_error(run(packed, at::tensor({1, 10}, at::kLong), at::tensor({0}, at::kLong)), "merged_embedding_bag",
                       "index 10");
    expect_input_error(run(packed, at::tensor({1, 2}, at::kLong), at::tensor({0, 3}, at::kLong)),
                       "merged_embedding_bag", "past the 2 indices");
    expect_input_error(run(at::zeros({10, 12}, at::kChar), c.indices, c.offsets), "merged_embedding_bag",
                       "fp32, bf16 or uint8");
}

}  // namespace
}  // namespace ipex::ops::recsys
