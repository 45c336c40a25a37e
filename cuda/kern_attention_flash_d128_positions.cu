/* Flash attention at head dim 128, masked by positions (context parallelism): the launch templates' instantiation
 * (kern_attention_flash_launch.cuh says why each pair has its own file). Empty for MUSA. */
#if !defined(TWINRUN_MUSA)
#include "kern_attention_flash_launch.cuh"

TR_FLASH_INSTANTIATE(128, tr_flash::fl_positions)
#endif
