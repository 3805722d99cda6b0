// greedy MODEL_DIR N ID,ID,...: prints N greedily generated ids (fp32), comma separated,
// through the installed C++ API: Model::load, Session::prefill/decode, argmax.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "llm/model.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        std::cerr << "usage: greedy MODEL_DIR N IDS\n";
        return 2;
    }
    std::vector<int32_t> prompt;
    std::stringstream ids(argv[3]);
    for (std::string id; std::getline(ids, id, ',');) prompt.push_back(std::stoi(id));
    const int64_t n = std::stoll(argv[2]);
    ipex::llm::LoadOptions options;
    options.dtype = "fp32";
    auto model = ipex::llm::Model::load(argv[1], options);
    ipex::llm::Session session(model, 1, static_cast<int64_t>(prompt.size()) + n);
    ipex::llm::Logits logits = session.prefill({prompt});
    for (int64_t i = 0; i < n; ++i) {
        const int32_t next = ipex::llm::argmax(logits.row(0), logits.vocab);
        std::cout << (i ? "," : "") << next;
        if (i + 1 < n) logits = session.decode({next});
    }
    std::cout << "\n";
    return 0;
}
