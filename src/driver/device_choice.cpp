#include "driver/device_choice.h"

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "mlajit/error.h"

namespace mlajit::driver {

int resolve_device(int requested) {
  if (requested >= 0) {
    if (requested >= device_count()) {
      throw Error(ErrorCode::kNoDevice,
                  fmt::format("device={} does not exist: {} CUDA device(s) visible", requested,
                              device_count()));
    }
    return requested;
  }
  if (device_count() < 1) {
    throw Error(ErrorCode::kNoDevice, "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)");
  }
  try {
    return current_device();
  } catch (const Error&) {
    return 0;  // no current context: the first device, as the runtime API would pick
  }
}

}  // namespace mlajit::driver
