// Writes the level table of `ipex-tool optimize` (recipes/optimize-levels.json) to the file
// named by its argument; the build installs it.
#include <fstream>
#include <iostream>

#include "passes/knobs.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        std::cerr << "usage: ipex_write_levels FILE\n";
        return 2;
    }
    std::ofstream out(argv[1]);
    out << ipex::passes::levels_json().dump(2) << "\n";
    out.close();
    if (!out) {
        std::cerr << "ipex_write_levels: cannot write " << argv[1] << "\n";
        return 2;
    }
    return 0;
}
