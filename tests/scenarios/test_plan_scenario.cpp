// Plan scenarios: [plan] and its candidates (docs/scenario-format.md, scenarios/README.md).

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <string>

#include "tetra/base/error.hpp"
#include "tetra/scenarios/plan.hpp"

using tetra::test::approx;
using tetra::UserError;
using namespace tetra::scenarios;

namespace {

const std::string kHead = R"([model]
preset = "llama3.1-8b"
[training]
seq_len = 4096
global_batch = 64
)";

PlanScenario load(const std::string& plan) {
  return load_plan_scenario_text(kHead + plan, std::string(TETRA_SOURCE_DIR) + "/tests/data/plan/t.toml");
}

std::string error_of(const std::string& plan) {
  try {
    (void)load(plan);
  } catch (const UserError& e) {
    MESSAGE(std::string(e.what()));
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("scenarios") {
  TEST_CASE("[plan]: GPU counts from lists and ranges, clusters sized to them") {
    const PlanScenario sc = load(R"(
[plan]
tokens = 1e12
[[plan.candidate]]
cluster = "dgx-h100"
gpus = "1024..16384"
[[plan.candidate]]
cluster = "hgx-h200"
gpus = "8..32 step 8"
[[plan.candidate]]
name = "racks"
cluster = "gb200-nvl72"
gpus = [1024, 72, 2]
[[plan.candidate]]
cluster_file = "slow_h100.cluster.toml"
gpus = 16
)");
    REQUIRE(sc.candidates.size() == 5 + 4 + 3 + 1);
    const long long want[] = {1024, 2048, 4096, 8192, 16384, 8, 16, 24, 32, 1024, 72, 2, 16};
    for (std::size_t i = 0; i < sc.candidates.size(); ++i) CHECK(sc.candidates[i].cluster.total_gpus() == want[i]);
    CHECK(sc.candidates[0].cluster.nodes == 128);
    // 1,024 GB200 on NVL72 racks: 16 racks of 64 used GPUs, as a measurement row.
    CHECK(sc.candidates[9].name == "racks");
    CHECK(sc.candidates[9].cluster.nvlink_domain() == 64);
    CHECK(sc.candidates[10].cluster.nvlink_domain() == 72);
    CHECK(sc.candidates[11].cluster.gpus_per_node == 2);  // less than a tray of 4
    CHECK(sc.candidates[12].name == "slow_h100.cluster.toml");
    CHECK(sc.candidates[12].cluster.inter.nic_bandwidth_Bps == approx(25e9));
    CHECK(sc.input_files.size() == 1);
    CHECK(sc.settings.tokens == 1e12);
    CHECK_FALSE(sc.settings.deadline_days.has_value());
  }

  TEST_CASE("[plan]: settings with units, defaults cited in goodput.hpp") {
    const PlanScenario sc = load(R"(
[plan]
tokens = 15.6e12
deadline_days = 90
budget = 1e8
failures_per_gpu_hour = 2e-5
checkpoint_bandwidth = "500GB/s"
restart_time = "15min"
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 64
price_per_gpu_hour = 2.5
)");
    CHECK(*sc.settings.deadline_days == 90);
    CHECK(*sc.settings.budget == 1e8);
    CHECK(sc.settings.goodput.failures_per_gpu_hour == 2e-5);
    CHECK(sc.settings.goodput.checkpoint_bandwidth_Bps == approx(5e11));
    CHECK(sc.settings.goodput.restart_s == 900);
    CHECK(*sc.candidates[0].price_per_gpu_hour == 2.5);
  }

  TEST_CASE("[plan]: pue, 1.56 by default (plan/energy.hpp), 1 to 3, errors at the key") {
    const std::string candidate = "[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = 8\n";
    CHECK(load("[plan]\ntokens = 1e9\n" + candidate).settings.pue == 1.56);
    CHECK(load("[plan]\ntokens = 1e9\npue = 1.1\n" + candidate).settings.pue == 1.1);
    CHECK(load("[plan]\ntokens = 1e9\npue = 1\n" + candidate).settings.pue == 1.0);
    CHECK(load("[plan]\ntokens = 1e9\npue = 3.0\n" + candidate).settings.pue == 3.0);
    // The file, line and column of the value, the key, the range.
    CHECK(error_of("[plan]\ntokens = 1e9\npue = 0.9\n" + candidate)
              .find("t.toml:8:7: [plan].pue: must be a number between 1 and 3, got 0.9") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\npue = 3.5\n" + candidate)
              .find("t.toml:8:7: [plan].pue: must be a number between 1 and 3, got 3.5") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\npue = \"1.5\"\n" + candidate)
              .find("t.toml:8:7: [plan].pue: expected a number") != std::string::npos);
  }

  TEST_CASE("[plan]: errors at the key") {
    CHECK(error_of("") .find("[plan]: missing table") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\n").find("t.toml:6:1: [plan].candidate: no candidates") != std::string::npos);
    CHECK(error_of("[plan]\n[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = 8\n").find("[plan].tokens: missing") !=
          std::string::npos);
    CHECK(error_of("[plan]\ntokens = 0\n[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = 8\n")
              .find("t.toml:7:10: [plan].tokens: must be greater than zero") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\nbudget = 5\n[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = 8\n")
              .find("[plan].budget: needs price_per_gpu_hour") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\n[[plan.candidate]]\ncluster = \"dgx-h999\"\ngpus = 8\n")
              .find("[plan.candidate].cluster: unknown cluster preset") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\n[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = \"8..x\"\n")
              .find("[plan.candidate].gpus: \"8..x\": \"x\" is not a whole number") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\n[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = [8, 8]\n")
              .find("[plan.candidate].gpus: value listed twice") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\n[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = 8\n"
                   "[[plan.candidate]]\ncluster = \"dgx-h100\"\ngpus = [16, 8]\n")
              .find("\"dgx-h100\" at 8 GPUs is listed twice") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\n[[plan.candidate]]\ncluster_file = \"nope.toml\"\ngpus = 8\n")
              .find("[plan.candidate].cluster_file: cannot read") != std::string::npos);
    CHECK(error_of("[plan]\ntokens = 1e9\ncandidate = 3\n").find("expected [[plan.candidate]] tables") !=
          std::string::npos);
  }

  TEST_CASE("[plan]: the precision must run on every candidate's GPU") {
    const std::string fp8 = R"([model]
preset = "llama3.1-8b"
[training]
seq_len = 4096
global_batch = 64
precision = "fp8"
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
[[plan.candidate]]
cluster = "dgx-a100-80gb"
gpus = 8
)";
    try {
      (void)load_plan_scenario_text(fp8, "fp8.toml");
      FAIL("no error");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("fp8.toml:13:11: [plan.candidate].cluster: dgx-a100-80gb:") == 0);
      CHECK(std::string(e.what()).find("FP8 tensor cores") != std::string::npos);
    }
  }
}
TEST_CASE("plan: a candidate's profile measured on another GPU model is refused at its cluster") {
  const std::string err = error_of(R"([plan]
tokens = 1e9
[[plan.candidate]]
cluster_file = "a100_with_h100_profile.cluster.toml"
gpus = 8
)");
  CAPTURE(err);
  CHECK(err.find("cluster_file") != std::string::npos);
  CHECK(err.find("profile measured on NVIDIA H100 80GB HBM3, but the cluster's GPU is") != std::string::npos);
}

