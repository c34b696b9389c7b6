// AttentionRunner for builds without cuDNN: attention rows are skipped (use --import-trace).
#include "benches.hpp"
#include "check.hpp"

namespace tetra::calib::gpu {

struct AttentionRunner::State {};

AttentionRunner::AttentionRunner(cudaStream_t /*stream*/) : s_(std::make_unique<State>()) {}
AttentionRunner::~AttentionRunner() = default;
bool AttentionRunner::available() { return false; }
std::string AttentionRunner::version() { return ""; }
void AttentionRunner::setup(const costmodel::AttentionRow& /*shape*/) {
  fail("attention", "this build has no cuDNN; time attention with --import-trace instead");
}
void AttentionRunner::launch() {}

}  // namespace tetra::calib::gpu
