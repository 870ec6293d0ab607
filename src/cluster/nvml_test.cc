#include "cluster/nvml.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace dais::cluster {
namespace {

TEST(NvmlTest, ShortModelNames) {
  EXPECT_EQ(ShortGpuModel("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(ShortGpuModel("NVIDIA H200"), "H200");
  EXPECT_EQ(ShortGpuModel("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(ShortGpuModel("Tesla V100-SXM2-16GB"), "V100");
  EXPECT_EQ(ShortGpuModel("Tesla T4"), "T4");
  EXPECT_EQ(ShortGpuModel("NVIDIA GeForce RTX 4090"), "RTX4090");
  EXPECT_EQ(ShortGpuModel("NVIDIA L4"), "L4");
  EXPECT_EQ(ShortGpuModel(""), "");
}

// Without the driver (this project's CI machines) NotFound naming the library; with a GPU, its
// devices. The GPU branch has not run yet: no GPU machine was lent to the sessions so far.
TEST(NvmlTest, DiscoversWhatThisMachineHas) {
  auto gpus = DiscoverGpus();
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    ASSERT_FALSE(gpus.ok());
    EXPECT_EQ(gpus.status().code(), StatusCode::kNotFound) << gpus.status().ToString();
    EXPECT_NE(gpus.status().message().find("libnvidia-ml.so.1"), std::string::npos);
    return;
  }
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_FALSE(gpus->empty());
  for (const Gpu& g : *gpus) {
    EXPECT_FALSE(g.model.empty());
    EXPECT_GT(g.memory_mib, 1024);
  }
}

}  // namespace
}  // namespace dais::cluster
