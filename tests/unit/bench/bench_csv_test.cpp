// CSV quoting (RFC 4180) and the JSON-to-table conversion behind every results.csv.
#include <gtest/gtest.h>

#include "bench/csv.h"

namespace trellis::bench {
namespace {

TEST(CsvTest, PlainFieldsStayAsTheyAre) {
  EXPECT_EQ(csv_field("cache on"), "cache on");
  EXPECT_EQ(csv_field("12.5"), "12.5");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("it's"), "it's");
}

TEST(CsvTest, SpecialFieldsAreQuoted) {
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("\""), "\"\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
}

TEST(CsvTest, HeaderThenRows) {
  EXPECT_EQ(to_csv({"run", "hit_rate"}, {}), "run,hit_rate\n");
  EXPECT_EQ(to_csv({"run", "note"}, {{"cache off", "a,b"}, {"", "x\"y"}, {"on", ""}}),
            "run,note\n"
            "cache off,\"a,b\"\n"
            ",\"x\"\"y\"\n"
            "on,\n");
  EXPECT_EQ(to_csv({"a,b", "c"}, {{"1", "2"}}), "\"a,b\",c\n1,2\n");
}

TEST(CsvTest, TableFromJsonItems) {
  const nlohmann::json items = nlohmann::json::parse(R"([
    {"run": "cache off", "hit_rate": 0, "wall_ms": 12.5, "mode": "fcfs", "extra": 1},
    {"run": "cache on, lpm", "hit_rate": 0.75, "wall_ms": 3, "mode": "lpm", "extra": 2}
  ])");
  const CsvTable table = csv_table(items, {"run", "hit_rate", "wall_ms", "mode"});
  EXPECT_EQ(table.header, (std::vector<std::string>{"run", "hit_rate", "wall_ms", "mode"}));
  ASSERT_EQ(table.rows.size(), 2u);
  // The first column as is; the others as JSON text (strings keep their quotes).
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"cache off", "0", "12.5", "\"fcfs\""}));
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"cache on, lpm", "0.75", "3", "\"lpm\""}));
  EXPECT_EQ(to_csv(table.header, table.rows),
            "run,hit_rate,wall_ms,mode\n"
            "cache off,0,12.5,\"\"\"fcfs\"\"\"\n"
            "\"cache on, lpm\",0.75,3,\"\"\"lpm\"\"\"\n");
}

TEST(CsvTest, TableOfNoItems) {
  const CsvTable table = csv_table(nlohmann::json::array(), {"run", "x"});
  EXPECT_EQ(table.header.size(), 2u);
  EXPECT_TRUE(table.rows.empty());
}

}  // namespace
}  // namespace trellis::bench
