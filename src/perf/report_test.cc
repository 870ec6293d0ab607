#include "perf/report.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace dais::perf {
namespace {

std::vector<LevelResult> Rows() {
  LevelResult a;
  a.concurrency = 1;
  a.throughput = 1234.5;
  a.latency_avg_us = 800;
  a.p50_us = 790;
  a.p90_us = 850;
  a.p95_us = 900;
  a.p99_us = 1000;
  a.stable = true;
  ServerBreakdown s;
  s.queue_us = 10;
  s.compute_infer_us = 300;
  s.success_us = 400;
  s.avg_batch = 1.5;
  a.server = s;
  LevelResult b = a;
  b.concurrency = 2;
  b.server.reset();
  b.stable = false;
  b.errors = 3;
  return {a, b};
}

TEST(Report, Csv) {
  std::string csv = ToCsv(Rows());
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "concurrency,rate,throughput_infer_per_sec,latency_avg_us,p50_us,p90_us,p95_us,p99_us,"
            "errors,server_queue_us,server_compute_input_us,server_compute_infer_us,"
            "server_compute_output_us,server_success_us,avg_batch,stable");
  EXPECT_NE(csv.find("\n1,0,1234.500,800.0,790.0,850.0,900.0,1000.0,0,10.0,0.0,300.0,0.0,400.0,"
                     "1.500,true\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\n2,0,1234.500,800.0,790.0,850.0,900.0,1000.0,3,,,,,,,false\n"),
            std::string::npos)
      << csv;
}

TEST(Report, Json) {
  rapidjson::Document doc;
  std::string json = ToJson(Rows());
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  ASSERT_TRUE(doc.IsArray());
  ASSERT_EQ(doc.Size(), 2u);
  EXPECT_EQ(doc[0]["concurrency"].GetInt(), 1);
  EXPECT_DOUBLE_EQ(doc[0]["throughput_infer_per_sec"].GetDouble(), 1234.5);
  EXPECT_DOUBLE_EQ(doc[0]["avg_batch"].GetDouble(), 1.5);
  EXPECT_TRUE(doc[0]["stable"].GetBool());
  EXPECT_TRUE(doc[1]["server_queue_us"].IsNull());
  EXPECT_EQ(doc[1]["errors"].GetInt(), 3);
  EXPECT_EQ(doc[0].MemberCount(), 16u);  // the CSV's columns
}

TEST(Report, TableAndProgress) {
  auto rows = Rows();
  std::string header = TableHeader(false, true);
  EXPECT_NE(header.find("concurrency"), std::string::npos);
  EXPECT_NE(header.find("queue"), std::string::npos);
  EXPECT_NE(TableRow(rows[0], false, true).find("1.50"), std::string::npos);
  EXPECT_NE(TableRow(rows[1], false, true).find("unstable"), std::string::npos);
  EXPECT_EQ(TableHeader(true, false).find("queue"), std::string::npos);
  EXPECT_EQ(ProgressLine(Level{16, 0}, 3, 12345.4, 812.2),
            "concurrency 16: window 3, 12345 infer/s, p99 812 us");
  EXPECT_EQ(ProgressLine(Level{0, 100}, 0, 0, 0), "rate 100/s: warming up");
}

}  // namespace
}  // namespace dais::perf
