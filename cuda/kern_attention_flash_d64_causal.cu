/* Flash attention at head dim 64, causal: the launch templates' instantiation
 * (kern_attention_flash_launch.cuh says why each pair has its own file). Empty for MUSA. */
#if !defined(TWINRUN_MUSA)
#include "kern_attention_flash_launch.cuh"

TR_FLASH_INSTANTIATE(64, tr_flash::fl_causal)
#endif
