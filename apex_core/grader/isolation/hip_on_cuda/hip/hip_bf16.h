// Apex HIP-on-CUDA shim: see hip_runtime.h.
#pragma once
#include "hip_runtime.h"
