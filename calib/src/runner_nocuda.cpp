// run_calibration for builds without CUDA: there is no device code to run.
#include "tetra/calib/runner.hpp"
#include "tetra/base/error.hpp"

namespace tetra::calib {

int run_calibration(const CalibrationOptions& /*options*/, costmodel::Profile& /*out*/) {
  throw UserError(
      "calibrate: no CUDA device found (this tetrasim was built without CUDA; configure with "
      "-DTETRASIM_WITH_CUDA=ON on a machine with the CUDA toolkit)");
}

bool calibration_built_with_cuda() noexcept { return false; }

}  // namespace tetra::calib
