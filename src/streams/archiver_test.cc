#include "streams/archiver.h"

#include <gtest/gtest.h>

#include "common/json.h"

namespace dais::streams {
namespace {

TEST(ArchiverTest, DayOfEntryIdIsTheUtcDayOfItsTime) {
  EXPECT_EQ(DayOfEntryId("0-0"), "1970-01-01");
  EXPECT_EQ(DayOfEntryId("1764892799999-3"), "2025-12-04");
  EXPECT_EQ(DayOfEntryId("1764892800000-0"), "2025-12-05");
  EXPECT_EQ(DayOfEntryId("not-an-id"), "");
}

TEST(ArchiverTest, LineEmbedsJsonFieldsAndQuotesTheRest) {
  Entry e{"5-1", {{"id", "r\"1"}, {"record", "{\"a\":[1,2]}"}, {"bad", "{not json"}}};
  EXPECT_EQ(ArchiveLine("s", e),
            "{\"entry_id\":\"5-1\",\"stream\":\"s\",\"id\":\"r\\\"1\",\"record\":{\"a\":[1,2]},"
            "\"bad\":\"{not json\"}");
  Entry control{"5-2", {{"k", std::string("a\x01", 2)}}};
  EXPECT_EQ(ArchiveLine("s", control),
            "{\"entry_id\":\"5-2\",\"stream\":\"s\",\"k\":\"a\\u0001\"}");
}

TEST(ArchiverTest, EveryLineReadsBackThroughParseJsonHoweverDeepItsFields) {
  // A restart (ReadIds) and `dais train` read the lines with ParseJson's nesting limit: a field
  // nested deeper is archived as a string, so its line still reads back.
  for (int depth :
       {json::kDefaultMaxDepth - 2, json::kDefaultMaxDepth - 1, json::kDefaultMaxDepth, 5000}) {
    const std::string v = std::string(depth, '[') + std::string(depth, ']');
    const std::string line = ArchiveLine("s", Entry{"7-1", {{"deep", v}}});
    rapidjson::Document doc;
    ASSERT_TRUE(json::ParseJson(line, &doc).ok()) << depth;
    EXPECT_EQ(doc["deep"].IsString(), depth > json::kDefaultMaxDepth - 1) << depth;
  }
}

}  // namespace
}  // namespace dais::streams
