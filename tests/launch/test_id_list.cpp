#include <gtest/gtest.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/id_list.h"

namespace ipex::launch {
namespace {

using Ids = std::vector<int>;

int usage_code(const std::string &text) {
    try {
        parse_id_list(text, "--cores-list");
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("--cores-list"), std::string::npos) << e.what();
        return static_cast<int>(e.code());
    }
    return 0;
}

TEST(IdList, ParsesRangesAndSingles) {
    EXPECT_EQ(parse_id_list("0-3,8,10-11", "--x"), (Ids{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_EQ(parse_id_list("7", "--x"), (Ids{7}));
    EXPECT_EQ(parse_id_list(" 2 - 4 , 0 ", "--x"), (Ids{0, 2, 3, 4}));
}

TEST(IdList, SortsAndDeduplicates) {
    EXPECT_EQ(parse_id_list("8-9,0-2,1,9", "--x"), (Ids{0, 1, 2, 8, 9}));
}

TEST(IdList, RejectsMalformedLists) {
    for (const char *bad : {"", "a", "1,,2", "3-1", "-1", "1-", "1.5", "0-3x", "99999999999"})
        EXPECT_EQ(usage_code(bad), 2) << "'" << bad << "'";
}

TEST(IdList, RejectsIdsAboveTheLimit) {
    EXPECT_THROW(parse_id_list("0-10", "--x", 9), Error);
    EXPECT_EQ(parse_id_list("0-9", "--x", 9).size(), 10u);
}

TEST(IdList, FormatsCompactly) {
    EXPECT_EQ(format_id_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
    EXPECT_EQ(format_id_list({5}), "5");
    EXPECT_EQ(format_id_list({}), "");
    EXPECT_EQ(format_id_list({0, 2, 4}), "0,2,4");
}

TEST(IdList, FormatThenParseRoundTrips) {
    const Ids ids{0, 1, 2, 5, 7, 8, 9, 56, 57};
    EXPECT_EQ(parse_id_list(format_id_list(ids), "--x"), ids);
}

}  // namespace
}  // namespace ipex::launch
