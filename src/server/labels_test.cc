#include "server/labels.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::server {
namespace {

std::string ErrorOf(std::string_view body) {
  auto r = ParseLabels(body, 1000);
  if (r.ok()) return "ok";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  return std::string(r.status().message());
}

TEST(LabelsTest, OneObjectAnArrayOrALabelsList) {
  auto one = ParseLabels(R"({"request_id":"r-1","label":true,"source":"chargebacks"})", 777);
  ASSERT_OK(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].request_id, "r-1");
  EXPECT_EQ((*one)[0].time_ms, 777);  // received time when none is given
  EXPECT_EQ(LabelValuesJson((*one)[0]), R"({"label":1})");

  auto list = ParseLabels(R"({"labels":[
      {"request_id":"r-1","label":0,"source":"s"},
      {"entity_ids":["42","7"],"time_ms":1764900000000,"labels":{"purchase":1,"amount":12.5},
       "source":"orders"}]})",
                          1);
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].time_ms, 1764900000000);
  EXPECT_EQ(EntityIdsJson((*list)[1]), R"(["42","7"])");
  EXPECT_EQ(LabelValuesJson((*list)[1]), R"({"purchase":1,"amount":12.5})");

  auto array = ParseLabels(R"([{"request_id":"a","label":1,"source":"s"},
                               {"request_id":"b","label":2,"source":"s"}])",
                           1);
  ASSERT_OK(array);
  EXPECT_EQ(array->size(), 2u);
}

TEST(LabelsTest, BadInputNamesTheLabelAndField) {
  EXPECT_NE(ErrorOf("{").find("malformed JSON"), std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"label":1,"source":"s"})"),
            "label: request_id or entity_ids is needed (what the label judges)");
  EXPECT_EQ(ErrorOf(R"({"request_id":"r","source":"s"})"), "label: label or labels is needed");
  EXPECT_EQ(ErrorOf(R"({"request_id":"r","label":1})"),
            "label.source: a non-empty string is needed");
  EXPECT_EQ(ErrorOf(R"({"labels":[{"request_id":"r","label":1,"source":"s"},
                                   {"request_id":"r","label":"yes","source":"s"}]})"),
            "labels[1].label: a finite number or a boolean is needed");
  EXPECT_EQ(ErrorOf(R"({"request_id":"r","label":1,"source":"s","lable":2})"),
            "label.lable: unknown field (expected request_id, entity_ids, time_ms, label, "
            "labels, source)");
  EXPECT_EQ(ErrorOf(R"({"request_id":"r","label":1,"labels":{"a":1},"source":"s"})"),
            "label.labels: give \"label\" or \"labels\", not both");
  EXPECT_EQ(ErrorOf(R"({"entity_ids":[],"label":1,"source":"s"})"),
            "label.entity_ids: an array of 1 to 16 ids is needed");
  EXPECT_EQ(ErrorOf(R"({"entity_ids":[42],"label":1,"source":"s"})"),
            "label.entity_ids: every id must be a string");
  EXPECT_EQ(ErrorOf(R"({"request_id":"r","time_ms":-5,"label":1,"source":"s"})"),
            "label.time_ms: a positive integer (ms since the epoch) is needed");
  EXPECT_EQ(ErrorOf(R"({"labels":[]})"), "labels: no labels");
  EXPECT_EQ(ErrorOf(R"({"labels":[],"x":1})"), "body: only \"labels\" is expected beside it");
  EXPECT_EQ(ErrorOf("42"), "body: a label object, an array or {\"labels\": [...]}");
  std::string many = "[";
  for (int i = 0; i <= 10000; ++i) many += std::string(i ? "," : "") + "{}";
  EXPECT_EQ(ErrorOf(many + "]"), "labels: 10001 labels; at most 10000 per request");
}

}  // namespace
}  // namespace dais::server
