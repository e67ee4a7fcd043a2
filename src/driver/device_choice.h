#pragma once
// Which device an API call runs on when the caller names one, or none (-1).

namespace mlajit::driver {

// `requested` >= 0: that ordinal, checked; -1: the current context's device, else 0 (as the
// CUDA runtime would pick). Throws Error(kNoDevice) for an ordinal out of range or when no
// device is visible, Error(kNoDriver) without a driver.
int resolve_device(int requested);

}  // namespace mlajit::driver
