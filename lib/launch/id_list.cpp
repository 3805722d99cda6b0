#include "launch/id_list.h"

#include <algorithm>
#include <cctype>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

int parse_id(const std::string &item, const std::string &text, const std::string &flag,
             int max_id) {
    if (item.empty() || !std::all_of(item.begin(), item.end(),
                                     [](unsigned char c) { return std::isdigit(c); }))
        throw_usage(flag + " '" + text + "': '" + item +
                    "' is not a non-negative id (write lists like 0-3,8,10-11)");
    if (item.size() > 9 || std::stoi(item) > max_id)
        throw_usage(flag + " '" + text + "': id " + item + " is too large (at most " +
                    std::to_string(max_id) + ")");
    return std::stoi(item);
}

std::string trim(const std::string &s) {
    size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

}  // namespace

std::vector<int> parse_id_list(const std::string &text, const std::string &flag,
                               int max_id) {
    std::vector<int> ids;
    if (trim(text).empty()) throw_usage(flag + " needs a list of ids such as 0-3,8");
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t end = text.find(',', pos);
        if (end == std::string::npos) end = text.size();
        const std::string item = trim(text.substr(pos, end - pos));
        const size_t dash = item.find('-');
        if (dash == std::string::npos) {
            ids.push_back(parse_id(item, text, flag, max_id));
        } else {
            const int lo = parse_id(trim(item.substr(0, dash)), text, flag, max_id);
            const int hi = parse_id(trim(item.substr(dash + 1)), text, flag, max_id);
            if (hi < lo)
                throw_usage(flag + " '" + text + "': range " + item +
                            " runs backwards (write " + std::to_string(hi) + "-" +
                            std::to_string(lo) + ")");
            for (int i = lo; i <= hi; ++i) ids.push_back(i);
        }
        pos = end + 1;
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

std::string format_id_list(const std::vector<int> &ids) {
    std::string out;
    size_t i = 0;
    while (i < ids.size()) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!out.empty()) out += ",";
        out += std::to_string(ids[i]);
        if (j > i) out += "-" + std::to_string(ids[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace ipex::launch
