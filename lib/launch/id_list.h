// Lists of CPU, core, node and instance ids as users write them: "0-3,8,10-11".
#pragma once

#include <string>
#include <vector>

namespace ipex::launch {

// Parses "0-3,8,10-11" into sorted, unique ids. `flag` names the option in errors
// (exit 2): empty items, reversed ranges, negative or non-numeric ids, ids above
// `max_id`.
std::vector<int> parse_id_list(const std::string &text, const std::string &flag,
                               int max_id = 1 << 20);

// Formats sorted ids compactly: {0,1,2,3,8} -> "0-3,8". Empty -> "".
std::string format_id_list(const std::vector<int> &ids);

}  // namespace ipex::launch
