#include "ops/topk_op.h"

#include <ATen/Parallel.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

// The least row length per k for the heap (n >= 64 k); for larger k aten's selection is kept.
constexpr int64_t kMinRowPerK = 64;
// A row shorter than this is one thread's work.
constexpr int64_t kMinPartLength = 1 << 16;

struct Candidate {
    float value;
    int64_t index;
};

// a > b with NaN above every number.
inline bool greater(float a, float b) { return (std::isnan(a) && !std::isnan(b)) || a > b; }

// a comes before b in the result: larger, or equal and at a lower index.
inline bool before(const Candidate &a, const Candidate &b) {
    if (greater(a.value, b.value)) return true;
    if (greater(b.value, a.value)) return false;
    return a.index < b.index;
}

// The k best of row[begin, end) (fewer if the part is shorter), in no order.
void best_of(const float *row, int64_t begin, int64_t end, int64_t k, std::vector<Candidate> &heap) {
    heap.clear();
    heap.reserve(static_cast<size_t>(k));
    // A heap whose top is its worst element: before() as the heap's "less".
    int64_t i = begin;
    for (; i < end && static_cast<int64_t>(heap.size()) < k; ++i) {
        heap.push_back({row[i], i});
        std::push_heap(heap.begin(), heap.end(), before);
    }
    if (static_cast<int64_t>(heap.size()) < k) return;
    float worst = heap.front().value;
    for (; i < end; ++i) {
        // Later indices lose ties, so only a strictly greater value enters.
        if (!greater(row[i], worst)) continue;
        std::pop_heap(heap.begin(), heap.end(), before);
        heap.back() = {row[i], i};
        std::push_heap(heap.begin(), heap.end(), before);
        worst = heap.front().value;
    }
}

}  // namespace

bool topk_own_kernel(const at::Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted) {
    if (!largest || !sorted || self.scalar_type() != at::kFloat || self.layout() != at::kStrided ||
        !self.device().is_cpu() || self.dim() == 0 || self.numel() == 0 || self.requires_grad())
        return false;
    const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
    const int64_t n = self.size(d);
    return d == self.dim() - 1 && self.stride(d) == 1 && k >= 1 && k * kMinRowPerK <= n;
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted) {
    if (!topk_own_kernel(self, k, dim, largest, sorted)) return at::topk(self, k, dim, largest, sorted);
    const int64_t n = self.size(-1);
    const at::Tensor rows = self.reshape({-1, n});  // a view: the last dim is contiguous, rows may be strided
    const int64_t count = rows.size(0);
    std::vector<int64_t> out_sizes = self.sizes().vec();
    out_sizes.back() = k;
    at::Tensor values = at::empty({count, k}, self.options());
    at::Tensor indices = at::empty({count, k}, self.options().dtype(at::kLong));
    const int64_t row_stride = rows.stride(0);
    const float *base = rows.data_ptr<float>();
    // Parts per row: the threads share one long row; many rows go a row per task.
    const int64_t threads = at::get_num_threads();
    const int64_t parts = count >= threads ? 1 : std::max<int64_t>(1, std::min(threads, n / kMinPartLength));
    std::vector<std::vector<Candidate>> found(static_cast<size_t>(count * parts));
    at::parallel_for(0, count * parts, 1, [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t r = task / parts, p = task % parts;
            best_of(base + r * row_stride, n * p / parts, n * (p + 1) / parts, k, found[static_cast<size_t>(task)]);
        }
    });
    float *v = values.data_ptr<float>();
    int64_t *ix = indices.data_ptr<int64_t>();
    at::parallel_for(0, count, 1, [&](int64_t first, int64_t last) {
        std::vector<Candidate> all;
        for (int64_t r = first; r < last; ++r) {
            all.clear();
            for (int64_t p = 0; p < parts; ++p) {
                const auto &part = found[static_cast<size_t>(r * parts + p)];
                all.insert(all.end(), part.begin(), part.end());
            }
            std::partial_sort(all.begin(), all.begin() + k, all.end(), before);
            for (int64_t j = 0; j < k; ++j) {
                v[r * k + j] = all[static_cast<size_t>(j)].value;
                ix[r * k + j] = all[static_cast<size_t>(j)].index;
            }
        }
    });
    return {values.view(out_sizes), indices.view(out_sizes)};
}

}  // namespace ipex::ops

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
          IPEX_GUARDED(ipex::ops::topk));
}
