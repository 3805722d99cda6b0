// Runs a fuzz target without libFuzzer: every file given on the command line (the seed
// corpus), then N seeded random mutations of each (byte flips, truncation, splices).
// Usage: fuzz_X_replay [--mutations N] FILE...
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

void run(const std::string &bytes) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

std::string mutate(const std::string &seed, std::mt19937 &rng) {
    std::string s = seed;
    const int kind = static_cast<int>(rng() % 4);
    if (s.empty() || kind == 3) {
        s.insert(s.begin() + static_cast<long>(s.empty() ? 0 : rng() % s.size()),
                 static_cast<char>(rng()));
        return s;
    }
    if (kind == 0) {
        for (int i = 0, n = 1 + static_cast<int>(rng() % 8); i < n; ++i) s[rng() % s.size()] = static_cast<char>(rng());
    } else if (kind == 1) {
        s.resize(rng() % s.size());
    } else {
        const size_t a = rng() % s.size(), b = rng() % s.size();
        s.replace(a, 1 + rng() % 16, s.substr(b, 1 + rng() % 16));
    }
    return s;
}

}  // namespace

int main(int argc, char **argv) {
    int mutations = 500;
    std::vector<std::string> seeds;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) {
            mutations = std::atoi(argv[++i]);
            continue;
        }
        std::ifstream in(argv[i], std::ios::binary);
        if (!in) {
            std::cerr << "cannot read " << argv[i] << "\n";
            return 2;
        }
        seeds.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    if (seeds.empty()) {
        // An empty corpus would test nothing and pass: a missing or mistyped corpus folder.
        std::cerr << "no seed files given: the corpus is empty or missing\n";
        return 2;
    }
    std::mt19937 rng(12345);
    size_t runs = 0;
    for (const auto &seed : seeds) {
        run(seed);
        ++runs;
        for (int m = 0; m < mutations; ++m, ++runs) run(mutate(seed, rng));
    }
    std::cout << runs << " inputs ran without a crash\n";
    return 0;
}
