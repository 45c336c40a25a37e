/* The seam headers (twinrun/dev.h, kern.h, coll.h, err.h) are C11; the .cu files of this folder are
 * C++ for nvcc/mcc. This wrapper gives those headers C linkage and spells C11's _Noreturn the C++
 * way, so the definitions here export the exact C symbols the engine links against. */
#ifndef TWINRUN_CUDA_SEAM_H
#define TWINRUN_CUDA_SEAM_H

#ifdef __cplusplus
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "twinrun/coll.h"
#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"
#include "twinrun/kern.h"
#include "twinrun/kern_check.h"

#ifdef __cplusplus
}
#undef _Noreturn
#endif

#endif
