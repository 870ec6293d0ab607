#include "features/offline/offline_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/status_testing.h"
#include "features/spec/feature_codec.h"

namespace dais::features {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSpec = R"(
entities:
  - {name: user_id, key_type: int64}
  - {name: device, key_type: string}
feature_groups:
  - name: user_profile
    entity: user_id
    features:
      - {name: age, dtype: FP32, default: 30}
      - {name: clicks, dtype: INT64, shape: [3], default: [1, 2, 3]}
      - {name: active, dtype: BOOL, default: 0}
  - name: device_stats
    entity: device
    features:
      - {name: score, dtype: FP64, default: -1}
      - {name: grid, dtype: INT32, shape: [2, 2], default: [0, 0, 0, 0]}
)";

constexpr int64_t kT0 = 1795946400;  // 2026-11-29T10:00:00Z
constexpr int64_t kUs = 1000000;

// The decoded user_profile payload.
struct Profile {
  float age;
  std::vector<int64_t> clicks;
  bool active;
};

struct Collected {
  std::vector<OfflineRow> rows;
  std::vector<std::pair<int64_t, std::string>> errors;  // line, message
  OfflineRowFn OnRow() {
    return [this](OfflineRow&& r) {
      rows.push_back(std::move(r));
      return true;
    };
  }
  OfflineErrorFn OnError() {
    return [this](int64_t line, const Status& st) { errors.emplace_back(line, st.message()); };
  }
};

class OfflineFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = ParseFeatureSpec(kSpec, "features.yaml");
    ASSERT_OK(spec);
    spec_ = *spec;
    std::string tmpl = (fs::temp_directory_path() / "offline_files_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  const GroupSpec& Profiles() const { return spec_->groups[0]; }
  const GroupSpec& Devices() const { return spec_->groups[1]; }

  std::string Write(const std::string& rel, std::string_view content) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

  StatusOr<ReadStats> Read(const std::string& path, const GroupSpec& group, Collected* c) {
    return ReadOfflineFile(path, *spec_, group, c->OnRow(), c->OnError());
  }

  Profile Decode(const OfflineRow& row) const {
    const GroupSpec& g = Profiles();
    EXPECT_EQ(row.payload.size(), g.record_bytes);
    Profile p;
    p.age =
        static_cast<float>(ElementAsDouble(DataType::kFp32, row.payload.data() + g.offsets[0], 0));
    for (int k = 0; k < 3; ++k) {
      p.clicks.push_back(ElementAsInt(DataType::kInt64, row.payload.data() + g.offsets[1], k));
    }
    p.active = ElementAsInt(DataType::kBool, row.payload.data() + g.offsets[2], 0) != 0;
    return p;
  }

  FeatureSpecPtr spec_;
  std::string root_;
};

TEST_F(OfflineFilesTest, CsvQuotesCrlfListsDefaultsAndBools) {
  // Columns in another order, an extra column with quotes, commas and a line break.
  const std::string path =
      Write("part-0.csv",
            "note,clicks,user_id,active,event_timestamp,age\r\n"
            "\"a, \"\"quoted\"\" note\",\"[4, 5, 6]\",1,True,2026-11-29T10:00:00Z,"
            "1.5\r\n"
            "\"two\r\nlines\",,2,false,2026-11-29 10:00:01,\r\n"
            "x,[7 8 9],3,1,1795946402000,\"2.5\"\r\n"
            "\r\n"
            "y,\"[1,2,3]\",0004,FALSE,1795946403,-0.25");
  Collected c;
  auto stats = Read(path, Profiles(), &c);
  ASSERT_OK(stats);
  EXPECT_TRUE(c.errors.empty()) << c.errors[0].second;
  EXPECT_EQ(stats->rows, 4);
  EXPECT_EQ(stats->bad_rows, 0);
  EXPECT_EQ(stats->bytes, static_cast<int64_t>(fs::file_size(path)));
  ASSERT_EQ(c.rows.size(), 4u);

  EXPECT_EQ(c.rows[0].entity_id, "1");
  EXPECT_EQ(c.rows[0].event_time_us, kT0 * kUs);
  Profile p = Decode(c.rows[0]);
  EXPECT_EQ(p.age, 1.5f);
  EXPECT_EQ(p.clicks, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_TRUE(p.active);

  EXPECT_EQ(c.rows[1].event_time_us, (kT0 + 1) * kUs);
  p = Decode(c.rows[1]);
  EXPECT_EQ(p.age, 30.0f);                               // empty: default
  EXPECT_EQ(p.clicks, (std::vector<int64_t>{1, 2, 3}));  // empty: default
  EXPECT_FALSE(p.active);

  EXPECT_EQ(c.rows[2].event_time_us, (kT0 + 2) * kUs);  // milliseconds
  p = Decode(c.rows[2]);
  EXPECT_EQ(p.clicks, (std::vector<int64_t>{7, 8, 9}));  // numpy's repr
  EXPECT_TRUE(p.active);

  EXPECT_EQ(c.rows[3].entity_id, "4");
  EXPECT_EQ(c.rows[3].event_time_us, (kT0 + 3) * kUs);  // seconds
  EXPECT_EQ(Decode(c.rows[3]).age, -0.25f);
}

TEST_F(OfflineFilesTest, CsvByteOrderMarkNestedListsAndStringEntities) {
  const std::string path = Write("d.csv",
                                 "\xEF\xBB\xBF"
                                 "device,event_timestamp,score,grid\n"
                                 "ab-1,2026-11-29T11:00:00+01:00,0.5,\"[[1, 2], [3, 4]]\"\n"
                                 " spaced ,2026-11-29T10:00:00.5Z,,\n");
  Collected c;
  auto stats = Read(path, Devices(), &c);
  ASSERT_OK(stats);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].entity_id, "ab-1");
  EXPECT_EQ(c.rows[0].event_time_us, kT0 * kUs);
  EXPECT_EQ(ElementAsDouble(DataType::kFp64, c.rows[0].payload.data(), 0), 0.5);
  EXPECT_EQ(ElementAsInt(DataType::kInt32, c.rows[0].payload.data() + 8, 3), 4);
  EXPECT_EQ(c.rows[1].entity_id, " spaced ");  // string ids are taken as written
  EXPECT_EQ(c.rows[1].event_time_us, kT0 * kUs + 500000);
  EXPECT_EQ(ElementAsDouble(DataType::kFp64, c.rows[1].payload.data(), 0), -1.0);
}

TEST_F(OfflineFilesTest, JsonLinesTimestampsNullsAndMissingKeys) {
  const std::string path = Write(
      "part-0.jsonl",
      R"({"user_id":1,"event_timestamp":1795946400000,"age":2.5,"clicks":[4,5,6],"active":true})"
      "\n"
      R"({"user_id":"2","event_timestamp":"2026-11-29T10:00:00.123456Z","age":null,"clicks":null})"
      "\r\n"
      "\n"
      R"({"event_timestamp":"2026-11-29 10:00:00","user_id":3.0,"clicks":"[7, 8, 9]","x":{}})");
  Collected c;
  auto stats = Read(path, Profiles(), &c);
  ASSERT_OK(stats);
  EXPECT_TRUE(c.errors.empty()) << c.errors[0].second;
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[0].entity_id, "1");
  EXPECT_EQ(c.rows[0].event_time_us, kT0 * kUs);
  Profile p = Decode(c.rows[0]);
  EXPECT_EQ(p.age, 2.5f);
  EXPECT_EQ(p.clicks, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_TRUE(p.active);

  EXPECT_EQ(c.rows[1].entity_id, "2");
  EXPECT_EQ(c.rows[1].event_time_us, kT0 * kUs + 123456);
  p = Decode(c.rows[1]);
  EXPECT_EQ(p.age, 30.0f);
  EXPECT_EQ(p.clicks, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(p.active);  // missing key: default

  EXPECT_EQ(c.rows[2].entity_id, "3");
  EXPECT_EQ(c.rows[2].event_time_us, kT0 * kUs);
  EXPECT_EQ(Decode(c.rows[2]).clicks, (std::vector<int64_t>{7, 8, 9}));
}

TEST_F(OfflineFilesTest, MissingFeatureColumnFailsTheFileNamingIt) {
  const std::string path = Write("part-0.csv", "user_id,event_timestamp,age,active\n1,0,1,1\n");
  Collected c;
  auto stats = Read(path, Profiles(), &c);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(stats.status().message().find("part-0.csv"), std::string::npos);
  EXPECT_NE(stats.status().message().find("\"clicks\""), std::string::npos)
      << stats.status().message();
  EXPECT_TRUE(c.rows.empty());

  const std::string no_time = Write("b.csv", "user_id,age,clicks,active\n");
  auto st2 = Read(no_time, Profiles(), &c);
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.status().message().find("event_timestamp"), std::string::npos);
}

TEST_F(OfflineFilesTest, BadRowsAreReportedWithTheirLineAndSkipped) {
  const std::string path = Write("part-0.csv",
                                 "user_id,event_timestamp,age,clicks,active\n"
                                 "1,0,1,\"[1,\n2,3]\",1\n"  // lines 2-3: one record
                                 "2,0,1,\"[1,2]\",1\n"      // line 4: too few values
                                 "3,0,1,,yes\n"             // line 5: not a bool
                                 "4,0,1,,1,extra\n"         // line 6: too many fields
                                 "5,tomorrow,1,,1\n"        // line 7: bad timestamp
                                 "6,0,1,,2\n"               // line 8: 2 is not a BOOL
                                 "7,0,1,,1\n");
  Collected c;
  auto stats = Read(path, Profiles(), &c);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->rows, 2);
  EXPECT_EQ(stats->bad_rows, 5);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].entity_id, "1");
  EXPECT_EQ(c.rows[1].entity_id, "7");
  ASSERT_EQ(c.errors.size(), 5u);
  EXPECT_EQ(c.errors[0].first, 4);
  EXPECT_EQ(c.errors[0].second, path + ":4: feature clicks: expected 3 values, got 2");
  EXPECT_EQ(c.errors[1].first, 5);
  EXPECT_NE(c.errors[1].second.find("feature active"), std::string::npos);
  EXPECT_EQ(c.errors[2].first, 6);
  EXPECT_NE(c.errors[2].second.find("fields"), std::string::npos);
  EXPECT_EQ(c.errors[3].first, 7);
  EXPECT_NE(c.errors[3].second.find("event_timestamp"), std::string::npos);
  EXPECT_EQ(c.errors[4].first, 8);
}

TEST_F(OfflineFilesTest, WrongEntityKeyTypeIsABadRow) {
  const std::string csv = Write("a.csv",
                                "user_id,event_timestamp,age,clicks,active\n"
                                "abc,0,1,,1\n"
                                "42.0,0,1,,1\n"  // pandas' float form of an int column
                                "42.5,0,1,,1\n"
                                "9007199254740993.0,0,1,,1\n"  // beyond 2^53: digits lost
                                ",0,1,,1\n");
  Collected c;
  auto stats = Read(csv, Profiles(), &c);
  ASSERT_OK(stats);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].entity_id, "42");
  ASSERT_EQ(c.errors.size(), 4u);
  EXPECT_EQ(c.errors[0].first, 2);
  EXPECT_NE(c.errors[0].second.find("column user_id"), std::string::npos) << c.errors[0].second;
  EXPECT_NE(c.errors[0].second.find("not an int64"), std::string::npos);

  const std::string jsonl = Write("a.jsonl", R"({"user_id":"abc","event_timestamp":0})"
                                             "\n"
                                             R"({"user_id":1.5,"event_timestamp":0})"
                                             "\n"
                                             R"({"user_id":[1],"event_timestamp":0})"
                                             "\n"
                                             R"({"event_timestamp":0})"
                                             "\n"
                                             R"({"user_id":5,"event_timestamp":0})");
  Collected j;
  stats = Read(jsonl, Profiles(), &j);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->bad_rows, 4);
  ASSERT_EQ(j.rows.size(), 1u);
  EXPECT_EQ(j.rows[0].entity_id, "5");
  EXPECT_EQ(j.errors[3].first, 4);
  EXPECT_NE(j.errors[3].second.find("user_id"), std::string::npos);

  // A string entity takes an integer JSON id as its text.
  const std::string dev = Write("d.jsonl", R"({"device":123,"event_timestamp":0,"score":1})");
  Collected d;
  ASSERT_OK(Read(dev, Devices(), &d));
  ASSERT_EQ(d.rows.size(), 1u);
  EXPECT_EQ(d.rows[0].entity_id, "123");
}

TEST_F(OfflineFilesTest, JsonLinesBadRows) {
  const std::string path = Write("p.json",
                                 "{\"user_id\":1,\"event_timestamp\":0,\"clicks\":[1,2,3,4]}\n"
                                 "not json\n"
                                 "[1,2]\n"
                                 "{\"user_id\":2,\"event_timestamp\":true}\n"
                                 "{\"user_id\":3,\"event_timestamp\":0,\"age\":\"x\"}\n"
                                 "{\"user_id\":4,\"event_timestamp\":0,\"age\":NaN}\n");
  Collected c;
  auto stats = Read(path, Profiles(), &c);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->bad_rows, 5);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].entity_id, "4");
  EXPECT_TRUE(std::isnan(Decode(c.rows[0]).age));
  EXPECT_EQ(c.errors[0].second, path + ":1: feature clicks: expected 3 values, got 4");
  EXPECT_EQ(c.errors[1].first, 2);
  EXPECT_NE(c.errors[1].second.find("invalid JSON"), std::string::npos);
}

TEST_F(OfflineFilesTest, ListPartitionsSortsAndIgnoresOtherEntries) {
  for (const char* d : {"dt=2026-11-30", "dt=2026-01-02", "dt=2026-11-29", "tmp", "dt=bad",
                        "dt=2026-02-30", "_temporary", "dt=2026-11-28x"}) {
    fs::create_directories(fs::path(root_) / "user_profile" / d);
  }
  Write("user_profile/dt=2026-03-01", "a file, not a partition");
  auto dates = ListPartitions(root_, "user_profile");
  ASSERT_OK(dates);
  EXPECT_EQ(*dates, (std::vector<std::string>{"2026-01-02", "2026-11-29", "2026-11-30"}));

  auto missing = ListPartitions(root_, "device_stats");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("device_stats"), std::string::npos);
}

TEST_F(OfflineFilesTest, PartitionFilesListsDataFilesByName) {
  const std::string dir = "user_profile/dt=2026-11-29/";
  for (const char* f : {"part-1.csv", "part-0.jsonl", "_SUCCESS", ".part-1.csv.crc", "b.JSON",
                        "notes.txt", "_started_123"}) {
    Write(dir + f, "");
  }
  fs::create_directories(fs::path(root_) / dir / "sub.csv");
  auto files = PartitionFiles(root_, "user_profile", "2026-11-29");
  ASSERT_OK(files);
  const std::string base = (fs::path(root_) / dir).string();
  EXPECT_EQ(*files, (std::vector<std::string>{base + "b.JSON", base + "part-0.jsonl",
                                              base + "part-1.csv"}));

  EXPECT_EQ(PartitionFiles(root_, "user_profile", "2026-11-30").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(PartitionFiles(root_, "user_profile", "../x").status().code(),
            StatusCode::kInvalidArgument);
  Write(dir + "part-2.csv.gz", "");
  files = PartitionFiles(root_, "user_profile", "2026-11-29");
  ASSERT_OK(files);
  EXPECT_EQ(files->back(), base + "part-2.csv.gz");
  Write(dir + "part-3.json.snappy", "");
  auto other = PartitionFiles(root_, "user_profile", "2026-11-29");
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("part-3.json.snappy: snappy compression"),
            std::string::npos)
      << other.status().message();
}

// gzip-compressed files (Spark's compression "gzip", pandas' compression="gzip") read as the
// plain ones, also as several concatenated gzip members; damaged ones fail naming the file.
TEST_F(OfflineFilesTest, GzipFilesReadLikePlainOnes) {
  const std::string csv =
      "user_id,event_timestamp,age,clicks,active\n1,2026-11-29T10:00:00Z,1.5,[4 5 6],true\n"
      "2,2026-11-29T10:00:01Z,2.5,[7 8 9],false\n";
  auto gzip = [&](const std::string& rel, const std::vector<std::string>& members) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary);  // truncate
    for (const std::string& m : members) {
      gzFile f = gzopen(p.c_str(), "ab");
      EXPECT_NE(f, nullptr);
      EXPECT_EQ(gzwrite(f, m.data(), static_cast<unsigned>(m.size())), static_cast<int>(m.size()));
      gzclose(f);
    }
    return p.string();
  };
  Collected plain, packed, two;
  ASSERT_OK(Read(Write("p.csv", csv), Profiles(), &plain));
  auto s1 = Read(gzip("p.csv.gz", {csv}), Profiles(), &packed);
  ASSERT_OK(s1);
  EXPECT_EQ(s1->rows, 2);
  EXPECT_EQ(s1->bad_rows, 0);
  ASSERT_EQ(packed.rows.size(), plain.rows.size());
  for (size_t i = 0; i < plain.rows.size(); ++i) {
    EXPECT_EQ(packed.rows[i].entity_id, plain.rows[i].entity_id);
    EXPECT_EQ(packed.rows[i].payload, plain.rows[i].payload);
  }
  const size_t cut = csv.find("\n2,") + 1;
  auto s2 = Read(gzip("two.CSV.GZ", {csv.substr(0, cut), csv.substr(cut)}), Profiles(), &two);
  ASSERT_OK(s2);
  EXPECT_EQ(s2->rows, 2);
  Collected j;
  auto s3 = Read(gzip("p.jsonl.gz", {"{\"user_id\": 5, \"event_timestamp\": 1795946400, "
                                     "\"age\": 3, \"clicks\": [1, 2, 3], \"active\": 1}\n"}),
                 Profiles(), &j);
  ASSERT_OK(s3);
  ASSERT_EQ(j.rows.size(), 1u);
  EXPECT_EQ(j.rows[0].entity_id, "5");

  // Truncated: the rows before the damage may be read, then an error naming the file.
  std::string whole;
  {
    std::ifstream in(fs::path(root_) / "p.csv.gz", std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Collected t;
  auto s4 = Read(Write("cut.csv.gz", whole.substr(0, whole.size() - 6)), Profiles(), &t);
  EXPECT_EQ(s4.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s4.status().message().find("cut.csv.gz: not a valid gzip file"), std::string::npos)
      << s4.status().message();
  // Plain text with a .gz name.
  Collected n;
  auto s5 = Read(Write("plain.csv.gz", csv), Profiles(), &n);
  EXPECT_EQ(s5.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s5.status().message().find("plain.csv.gz: named .gz but not gzip data"),
            std::string::npos)
      << s5.status().message();
  EXPECT_TRUE(n.rows.empty());
  EXPECT_EQ(OfflineFormatOf("x.txt.gz").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OfflineFilesTest, UnreadableFiles) {
  Collected c;
  EXPECT_EQ(Read(root_ + "/none.csv", Profiles(), &c).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Read(Write("x.parquet", ""), Profiles(), &c).status().code(),
            StatusCode::kInvalidArgument);
  fs::create_directories(fs::path(root_) / "dir.csv");
  EXPECT_EQ(Read(root_ + "/dir.csv", Profiles(), &c).status().code(), StatusCode::kInvalidArgument);
  // An empty file (Spark writes one for an empty task) has no rows.
  auto empty = Read(Write("e.csv", ""), Profiles(), &c);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->rows, 0);
}

TEST_F(OfflineFilesTest, StopsWhenOnRowReturnsFalse) {
  std::string csv = "user_id,event_timestamp,age,clicks,active\n";
  for (int i = 0; i < 10; ++i) csv += std::to_string(i) + ",0,1,,1\n";
  int seen = 0;
  auto stats = ReadOfflineFile(
      Write("s.csv", csv), *spec_, Profiles(), [&](OfflineRow&&) { return ++seen < 3; }, nullptr);
  ASSERT_OK(stats);
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(stats->rows, 3);
}

// Any split of the input into pieces gives the same rows and errors as one piece.
TEST_F(OfflineFilesTest, ParserResultDoesNotDependOnChunking) {
  const std::string csv =
      "\xEF\xBB\xBFuser_id,event_timestamp,age,clicks,active\r\n"
      "1,0,1,\"[1,\r\n2,3]\",1\r\n"
      "2,0,\"\"\"\",,1\r\n"
      "3,0,\"1\"x,,1\r\n"
      "4,0,2,\"[4,5,6]\",0";
  auto run = [&](OfflineFormat format, std::string_view data, size_t piece) {
    Collected c;
    auto parser = OfflineParser::Create(format, "mem", *spec_, Profiles(), c.OnRow(), c.OnError());
    EXPECT_OK(parser);
    for (size_t p = 0; p < data.size(); p += piece) {
      EXPECT_OK((*parser)->Feed(data.substr(p, piece)));
    }
    EXPECT_OK((*parser)->Finish());
    std::string out;
    for (const auto& r : c.rows) out += r.entity_id + "@" + r.payload + "|";
    for (const auto& [line, msg] : c.errors) out += std::to_string(line) + msg + "|";
    return out;
  };
  const std::string whole = run(OfflineFormat::kCsv, csv, csv.size());
  EXPECT_NE(whole.find("mem:5: column 3: text after a closing quote"), std::string::npos) << whole;
  EXPECT_NE(whole.find("mem:4: feature age"), std::string::npos) << whole;
  for (size_t piece : {1, 2, 3, 7}) EXPECT_EQ(run(OfflineFormat::kCsv, csv, piece), whole);

  const std::string jsonl =
      "{\"user_id\":1,\"event_timestamp\":0}\r\n\n{\"user_id\":2,\"event_timestamp\":0}";
  const std::string jwhole = run(OfflineFormat::kJsonLines, jsonl, jsonl.size());
  for (size_t piece : {1, 5}) EXPECT_EQ(run(OfflineFormat::kJsonLines, jsonl, piece), jwhole);
}

TEST_F(OfflineFilesTest, OverlongRecordsAreBadRowsAndReadingResumes) {
  for (OfflineFormat format : {OfflineFormat::kCsv, OfflineFormat::kJsonLines}) {
    const bool csv = format == OfflineFormat::kCsv;
    const std::string header = csv ? "user_id,event_timestamp,age,clicks,active\n" : "";
    auto row = [&](int id) {
      return csv ? std::to_string(id) + ",0,1,,1\n"
                 : "{\"user_id\":" + std::to_string(id) + ",\"event_timestamp\":0}\n";
    };
    const std::string data = header + row(1) + (csv ? "2,0,1,\"[" : "{\"user_id\":2,\"x\":\"") +
                             std::string(1000, '1') + "\n" + row(3);
    Collected c;
    auto parser =
        OfflineParser::Create(format, "mem", *spec_, Profiles(), c.OnRow(), c.OnError(), 100);
    ASSERT_OK(parser);
    ASSERT_OK((*parser)->Feed(data));
    ASSERT_OK((*parser)->Finish());
    ASSERT_EQ(c.rows.size(), 2u) << csv;
    EXPECT_EQ(c.rows[1].entity_id, "3");
    ASSERT_EQ(c.errors.size(), 1u);
    EXPECT_NE(c.errors[0].second.find("longer than 100 bytes"), std::string::npos);
  }
}

TEST_F(OfflineFilesTest, UnterminatedQuoteAtTheEndIsABadRow) {
  Collected c;
  auto stats = Read(Write("u.csv",
                          "user_id,event_timestamp,age,clicks,active\n1,0,1,,1\n"
                          "2,0,\"1,,1\n"),
                    Profiles(), &c);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->rows, 1);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(c.errors[0].first, 3);
  EXPECT_NE(c.errors[0].second.find("no closing quote"), std::string::npos);
}

// 200k rows, ~10 MB: read in 64 KiB chunks; this checks it streams at a speed that does not matter
// next to loading the rows into Redis.
TEST_F(OfflineFilesTest, StreamsALargeFile) {
  const fs::path p = fs::path(root_) / "big.csv";
  {
    std::ofstream out(p, std::ios::binary);
    out << "user_id,event_timestamp,age,clicks,active,comment\n";
    for (int i = 0; i < 200000; ++i) {
      out << i << ",2026-11-29T10:00:00.000Z," << i % 90 << ".5,\"[" << i << ", 2, 3]\","
          << (i % 2 ? "True" : "False") << ",\"some, text\"\n";
    }
  }
  int64_t sum = 0;
  const auto start = std::chrono::steady_clock::now();
  auto stats = ReadOfflineFile(
      p.string(), *spec_, Profiles(),
      [&](OfflineRow&& row) {
        sum += ElementAsInt(DataType::kInt64, row.payload.data() + Profiles().offsets[1], 0);
        return true;
      },
      nullptr);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_OK(stats);
  EXPECT_EQ(stats->rows, 200000);
  EXPECT_EQ(stats->bad_rows, 0);
  EXPECT_EQ(sum, 199999LL * 200000 / 2);
  EXPECT_EQ(stats->bytes, static_cast<int64_t>(fs::file_size(p)));
  EXPECT_LT(seconds, 20.0);  // ~0.2 s in release; sanitizer builds are far slower
  RecordProperty("seconds", std::to_string(seconds));
}

TEST(ParseTimestampUs, Forms) {
  struct Case {
    const char* text;
    int64_t us;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"2026-11-29T10:00:00Z", kT0 * kUs},
           {"2026-11-29 10:00:00", kT0 * kUs},
           {"2026-11-29t10:00z", kT0 * kUs},
           {" 2026-11-29T10:00:00+00:00 ", kT0 * kUs},
           {"2026-11-29T11:30:00+01:30", kT0 * kUs},
           {"2026-11-29T05:00:00-0500", kT0 * kUs},
           {"2026-11-29T12:00:00+02", kT0 * kUs},
           {"2026-11-29T10:00:00.123Z", kT0 * kUs + 123000},
           {"2026-11-29T10:00:00.123456789", kT0 * kUs + 123456},
           {"2026-11-29", 1795910400 * kUs},
           {"2000-02-29T23:59:59Z", 951868799 * kUs},
           {"1969-12-31T23:59:59Z", -kUs},
           {"1795946400", kT0 * kUs},
           {"1795946400.25", kT0 * kUs + 250000},
           {"1795946400000", kT0 * kUs},
           {"1795946400000000", kT0 * kUs},
           {"1795946400000000000", kT0 * kUs},
           {"0", 0},
           {"-1", -kUs},
       }) {
    auto us = ParseTimestampUs(c.text);
    ASSERT_OK(us);
    EXPECT_EQ(*us, c.us) << c.text;
  }
  for (const char* bad : {"", "yesterday", "2026-02-30", "2026-13-01", "2026-11-29T24:00:00",
                          "2026-11-29T10:00:00.", "2026-11-29T10:00:00Zx", "2026-11-29 10",
                          "2026/11/29", "nan", "1e300", "2026-11-29T10:00:00+25:00"}) {
    auto us = ParseTimestampUs(bad);
    EXPECT_FALSE(us.ok()) << bad;
    EXPECT_EQ(us.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(UtcDate, Dates) {
  EXPECT_EQ(UtcDate(0), "1970-01-01");
  EXPECT_EQ(UtcDate(-1), "1969-12-31");
  EXPECT_EQ(UtcDate(kT0), "2026-11-29");
  EXPECT_EQ(UtcDate(kT0 - 86400), "2026-11-28");
  EXPECT_EQ(UtcDate(951868799), "2000-02-29");
  EXPECT_EQ(UtcDate(951868800), "2000-03-01");
}

}  // namespace
}  // namespace dais::features
