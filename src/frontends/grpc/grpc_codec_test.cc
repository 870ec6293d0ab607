#include "frontends/grpc/grpc_codec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/status_testing.h"

namespace dais::frontends::grpc {
namespace {

inference::ModelInferRequest RawRequest(const std::string& bytes, std::vector<int64_t> shape,
                                        const std::string& dtype = "FP32") {
  inference::ModelInferRequest msg;
  msg.set_model_name("m");
  auto* in = msg.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype(dtype);
  for (int64_t d : shape) in->add_shape(d);
  msg.add_raw_input_contents(bytes);
  return msg;
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(GrpcCodecTest, RawInputsBorrowFromTheMessage) {
  auto msg = RawRequest(Floats({1, 2, 3, 4}), {2, 2});
  msg.set_model_version("3");
  msg.set_id("abc");
  runtime::InferenceRequest r;
  ASSERT_OK(FromInferRequest(msg, &r));
  EXPECT_EQ(r.model_version, 3);
  EXPECT_EQ(r.id, "abc");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].data.data(), msg.raw_input_contents(0).data());
  EXPECT_EQ(r.inputs[0].shape, (std::vector<int64_t>{2, 2}));
}

TEST(GrpcCodecTest, RawSizeMustMatchShape) {
  auto msg = RawRequest(Floats({1, 2, 3}), {2, 2});
  runtime::InferenceRequest r;
  Status s = FromInferRequest(msg, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holds 12 bytes"), std::string::npos) << s.message();
}

TEST(GrpcCodecTest, RawCountMustMatchInputs) {
  auto msg = RawRequest(Floats({1, 2}), {1, 2});
  msg.add_raw_input_contents(Floats({1}));
  runtime::InferenceRequest r;
  Status s = FromInferRequest(msg, &r);
  EXPECT_NE(s.message().find("raw_input_contents has 2 entries for 1 inputs"), std::string::npos)
      << s.message();
}

TEST(GrpcCodecTest, MixingRawAndTypedIsRejected) {
  auto msg = RawRequest(Floats({1, 2}), {1, 2});
  auto* second = msg.add_inputs();
  second->set_name("B");
  second->set_datatype("FP32");
  second->add_shape(1);
  second->mutable_contents()->add_fp32_contents(1);
  msg.add_raw_input_contents(Floats({1}));
  runtime::InferenceRequest r;
  Status s = FromInferRequest(msg, &r);
  EXPECT_NE(s.message().find("use one or the other"), std::string::npos) << s.message();
}

TEST(GrpcCodecTest, TypedContentsAreConvertedAndRangeChecked) {
  inference::ModelInferRequest msg;
  auto* in = msg.add_inputs();
  in->set_name("X");
  in->set_datatype("INT8");
  in->add_shape(3);
  in->mutable_contents()->add_int_contents(1);
  in->mutable_contents()->add_int_contents(-2);
  in->mutable_contents()->add_int_contents(127);
  runtime::InferenceRequest r;
  ASSERT_OK(FromInferRequest(msg, &r));
  ASSERT_EQ(r.inputs[0].data.size(), 3u);
  EXPECT_EQ(static_cast<int8_t>(r.inputs[0].data[1]), -2);

  in->mutable_contents()->set_int_contents(2, 300);
  runtime::InferenceRequest r2;
  Status s = FromInferRequest(msg, &r2);
  EXPECT_NE(s.message().find("value 300 at index 2 is out of range"), std::string::npos)
      << s.message();

  in->mutable_contents()->set_int_contents(2, 127);
  in->mutable_contents()->add_int_contents(4);
  runtime::InferenceRequest r3;
  s = FromInferRequest(msg, &r3);
  EXPECT_NE(s.message().find("has 3 elements but contents has 4"), std::string::npos)
      << s.message();
}

TEST(GrpcCodecTest, BytesRawMustBeLengthPrefixed) {
  std::string good;
  for (std::string e : {"ab", "c"}) {
    uint32_t len = static_cast<uint32_t>(e.size());
    good.append(reinterpret_cast<const char*>(&len), 4);
    good += e;
  }
  runtime::InferenceRequest r;
  EXPECT_OK(FromInferRequest(RawRequest(good, {2}, "BYTES"), &r));
  runtime::InferenceRequest r2;
  EXPECT_FALSE(
      FromInferRequest(RawRequest(good.substr(0, good.size() - 1), {2}, "BYTES"), &r2).ok());
}

TEST(GrpcCodecTest, UnknownDatatypeAndBadVersion) {
  runtime::InferenceRequest r;
  Status s = FromInferRequest(RawRequest(Floats({1}), {1}, "FP31"), &r);
  EXPECT_NE(s.message().find("unknown datatype 'FP31'"), std::string::npos);
  auto msg = RawRequest(Floats({1}), {1});
  msg.set_model_version("x1");
  runtime::InferenceRequest r2;
  EXPECT_NE(FromInferRequest(msg, &r2).message().find("invalid model_version"), std::string::npos);
}

TEST(GrpcCodecTest, ResponseUsesRawOutputContents) {
  runtime::InferenceResponse resp;
  resp.model_name = "m";
  resp.model_version = "1";
  resp.id = "q";
  Tensor t;
  t.name = "OUT";
  t.dtype = DataType::kFp32;
  t.shape = {1, 2};
  std::string bytes = Floats({5, 6});
  std::memcpy(t.Allocate(8), bytes.data(), 8);
  resp.outputs.push_back(std::move(t));
  resp.output_binary.push_back(true);
  inference::ModelInferResponse msg;
  ToInferResponse(resp, &msg);
  EXPECT_EQ(msg.outputs(0).datatype(), "FP32");
  EXPECT_EQ(msg.raw_output_contents(0), bytes);
  EXPECT_EQ(msg.id(), "q");
}

TEST(GrpcCodecTest, StatusCodesMapOneToOne) {
  EXPECT_EQ(ToGrpcStatus(NotFound("x")).error_code(), ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(ResourceExhausted("x")).error_code(),
            ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(DeadlineExceeded("x")).error_code(),
            ::grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(ToGrpcStatus(OkStatus()).ok());
}

}  // namespace
}  // namespace dais::frontends::grpc
