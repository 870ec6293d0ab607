#include "streams/event_labels.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::streams {
namespace {

Entry Purchase(const std::string& payload) {
  return Entry{"1796500000123-0",
               {{"event_id", "orders:7"}, {"txn_id", "t-7"}, {"payload", payload}}};
}

TEST(EventLabelsTest, AnOrderIsThePurchaseLabelOfItsUser) {
  EventLabelRule r;
  r.label = "purchase";
  r.entity_fields = {"payload.user_id"};
  r.source = "orders";
  ASSERT_OK(ValidateRule(r));
  ASSERT_OK_AND_ASSIGN(server::Label l,
                       LabelOfEvent(r, Purchase(R"({"order_id":"o-7","user_id":42,"item_id":3})")));
  EXPECT_EQ(l.entity_ids, (std::vector<std::string>{"42"}));
  EXPECT_EQ(l.request_id, "");
  EXPECT_EQ(l.time_ms, 1796500000123);  // the entry id's time
  ASSERT_EQ(l.values.size(), 1u);
  EXPECT_EQ(l.values[0].first, "purchase");
  EXPECT_EQ(l.values[0].second, 1);
  EXPECT_EQ(l.source, "orders");
}

TEST(EventLabelsTest, AChargebackConfirmsFraudByRequestIdWithValueAndTimeFromTheEvent) {
  EventLabelRule r;
  r.label = "fraud";
  r.request_id_field = "payload.request_id";
  r.value_field = "payload.confirmed";
  r.time_field = "payload.time_ms";
  r.source = "chargebacks";
  ASSERT_OK_AND_ASSIGN(
      server::Label l,
      LabelOfEvent(r,
                   Purchase(R"({"request_id":"r-9","confirmed":true,"time_ms":1796400000000})")));
  EXPECT_EQ(l.request_id, "r-9");
  EXPECT_EQ(l.values[0].second, 1);
  EXPECT_EQ(l.time_ms, 1796400000000);
  auto missing = LabelOfEvent(r, Purchase(R"({"confirmed":true,"time_ms":1})"));
  EXPECT_NE(missing.status().message().find("payload.request_id: missing"), std::string::npos)
      << missing.status().message();
  auto text = LabelOfEvent(r, Purchase(R"({"request_id":"r","confirmed":"yes","time_ms":1})"));
  EXPECT_NE(text.status().message().find("payload.confirmed: not a number"), std::string::npos);
  auto not_json = LabelOfEvent(r, Purchase("not json"));
  EXPECT_FALSE(not_json.ok());
}

TEST(EventLabelsTest, RulesNameWhatIsMissing) {
  EventLabelRule r;
  EXPECT_NE(ValidateRule(r).message().find("--label"), std::string::npos);
  r.label = "x";
  EXPECT_NE(ValidateRule(r).message().find("--source"), std::string::npos);
  r.source = "s";
  EXPECT_NE(ValidateRule(r).message().find("--request-id-field or --entity-field"),
            std::string::npos);
  r.request_id_field = "a";
  r.entity_fields = {"b"};
  EXPECT_FALSE(ValidateRule(r).ok());
}

}  // namespace
}  // namespace dais::streams
