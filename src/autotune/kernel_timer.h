// Timing candidate kernel configurations on the GPU for autotuning
// (src/autotune/tune.h). Each candidate is the kernel emitted with that config,
// compiled by NVRTC for the device's architecture and loaded as its own
// module (a library kernel: the runtime's cuBLASLt / cuDNN call with that
// algorithm rank); it runs on random inputs, is checked against the default
// config's output, and is timed with CUDA events, the L2 cache flushed before
// every repetition, at least 25 repetitions and 20 ms, keeping the median. A
// candidate whose first timed launch takes over 10x the default's median is
// dropped with a note.
#pragma once

#include "src/autotune/tune.h"

namespace tcc::runtime {

// The current device as the tuning cache keys it: name, sm_XY, driver and
// NVRTC versions. NoDevice where there is no GPU.
autotune::DeviceKey current_device_key();

// A Measurer for the current device. NoDevice where there is no GPU.
autotune::Measurer cuda_measurer();

}  // namespace tcc::runtime
