// The gateway reads and rewrites a KServe request's model name and version without decoding the
// tensors: checked against the generated protobuf classes.
#include "gateway/proto_fields.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"
#include "grpc_service.pb.h"

namespace dais::gateway {
namespace {

inference::ModelInferRequest Request() {
  inference::ModelInferRequest r;
  r.set_model_name("ranker");
  r.set_id("req-1");
  auto* in = r.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(4);
  r.add_raw_input_contents(std::string(16, '\x7f'));
  (*r.mutable_parameters())["priority"].set_int64_param(3);
  return r;
}

TEST(ProtoFields, ReadsTheModelNameAndVersion) {
  inference::ModelInferRequest r = Request();
  ASSERT_OK_AND_ASSIGN(ModelRef ref, ReadModelRef(r.SerializeAsString()));
  EXPECT_EQ(ref.name, "ranker");
  EXPECT_EQ(ref.version, "");
  r.set_model_version("7");
  ASSERT_OK_AND_ASSIGN(ref, ReadModelRef(r.SerializeAsString()));
  EXPECT_EQ(ref.version, "7");
  ASSERT_OK_AND_ASSIGN(ref, ReadModelRef(""));
  EXPECT_EQ(ref.name, "");
}

TEST(ProtoFields, AppendedFieldsReplaceTheNameAndVersionAndKeepTheRest) {
  const inference::ModelInferRequest original = Request();
  std::string bytes = original.SerializeAsString();
  AppendStringField(&bytes, 1, "mlp_small");
  AppendStringField(&bytes, 2, "2");
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.model_name(), "mlp_small");
  EXPECT_EQ(parsed.model_version(), "2");
  EXPECT_EQ(parsed.id(), "req-1");
  ASSERT_EQ(parsed.inputs_size(), 1);
  EXPECT_EQ(parsed.inputs(0).shape(1), 4);
  EXPECT_EQ(parsed.raw_input_contents(0), original.raw_input_contents(0));
  EXPECT_EQ(parsed.parameters().at("priority").int64_param(), 3);
  ASSERT_OK_AND_ASSIGN(ModelRef ref, ReadModelRef(bytes));
  EXPECT_EQ(ref.name, "mlp_small");
  EXPECT_EQ(ref.version, "2");
  // A long value takes a multi-byte length.
  AppendStringField(&bytes, 1, std::string(300, 'm'));
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.model_name().size(), 300u);
}

TEST(ProtoFields, MalformedMessagesAreInvalidArgument) {
  const std::string good = Request().SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{3}, good.size() - 1}) {
    auto r = ReadModelRef(std::string_view(good).substr(0, cut));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << cut;
  }
  EXPECT_EQ(ReadModelRef("\x08\x01").status().code(), StatusCode::kInvalidArgument)
      << "field 1 as a varint";
  EXPECT_EQ(ReadModelRef(std::string("\x00\x01", 2)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadModelRef("\x0b").status().code(), StatusCode::kInvalidArgument) << "a group";
  EXPECT_EQ(ReadModelRef("\x0a\xff\xff\xff\xff\x0f").status().code(), StatusCode::kInvalidArgument)
      << "a length past the end";
}

}  // namespace
}  // namespace dais::gateway
