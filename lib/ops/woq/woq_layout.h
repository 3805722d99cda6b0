// The packed weight layout of the ipex weight-only linear kernels, shared by the packer
// (lib/woq, the normalized checkpoint) and the kernels (ipex::woq_linear). Header-only and
// free of libtorch so that the AVX-512 translation unit can include it.
//
// A layer y = x W^T + b with W [N, K] is held as
//   qweight  uint8 [N, Kp/2] (int4) or [N, Kp] (int8), Kp = K rounded up to kBlock
//   scales   float [N, G], zeros float [N, G], G = K / group_size groups of input channels
//   W[n, k] = (q[n, k] - zeros[n, k / group_size]) * scales[n, k / group_size]
// int4: input channels come in blocks of kBlock = 32; byte j (0..15) of a block holds
// channel j in its low nibble and channel j + 16 in its high nibble. Padding channels
// (K..Kp) hold q = 0 and meet zero activations.
// With act-order the channels are stored in the order `perm` (x is gathered by perm first).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ipex::woq {

constexpr int64_t kBlock = 32;

inline int64_t padded_in_features(int64_t k) { return (k + kBlock - 1) / kBlock * kBlock; }

inline int64_t packed_row_bytes(int64_t k, int bits) {
    return bits == 4 ? padded_in_features(k) / 2 : padded_in_features(k);
}

// The 4-bit value of input channel k in one packed row.
inline uint8_t int4_at(const uint8_t *row, int64_t k) {
    const int64_t block = k / kBlock, j = k % kBlock;
    const uint8_t byte = row[block * (kBlock / 2) + (j % (kBlock / 2))];
    return j < kBlock / 2 ? (byte & 0x0f) : (byte >> 4);
}

// Stores q (0..15) for input channel k; the byte must start zeroed for its other nibble.
inline void set_int4(uint8_t *row, int64_t k, uint8_t q) {
    const int64_t block = k / kBlock, j = k % kBlock;
    uint8_t &byte = row[block * (kBlock / 2) + (j % (kBlock / 2))];
    byte = j < kBlock / 2 ? static_cast<uint8_t>((byte & 0xf0) | (q & 0x0f))
                          : static_cast<uint8_t>((byte & 0x0f) | (q << 4));
}

}  // namespace ipex::woq
