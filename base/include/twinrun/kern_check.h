/* The kernel contract, checked once for both backends: kern_X_check takes kern_X's own arguments and
 * ends the rank (tr_fatal, naming the argument and the flag to look at) when they break what
 * twinrun/kern.h promises about shapes, descriptors, pointers and element types. Each backend's kern_X
 * calls it first (the twin after charging the kernel's cost); what only a backend can check stays
 * there: the twin reads token ids, targets and positions (device memory is host memory), the CUDA
 * kernels check theirs on the device and add their own size limits. base/kern/kern_check.c. */
#ifndef TWINRUN_BASE_KERN_CHECK_H
#define TWINRUN_BASE_KERN_CHECK_H

#include "twinrun/kern.h"

/* b is an fp32 or bf16 tensor with a device pointer ("what" names it in the message). */
void kern_check_float_buf(tr_buf b, const char *what);

#define TR_KERNEL_CHECK_DECLARE(name, params) void name##_check params;
TR_KERNELS(TR_KERNEL_CHECK_DECLARE)
#undef TR_KERNEL_CHECK_DECLARE

#endif
