/* Which GPU a rank's dev_open(ordinal) means: ordinal counts from the device the launcher gave this
 * process, LOCAL_RANK (torchrun style) or OMPI_COMM_WORLD_LOCAL_RANK (mpirun), so the engine's
 * dev_open(0) lands on GPU LOCAL_RANK of its node. A launcher that already isolated one GPU per
 * process (CUDA_VISIBLE_DEVICES with a single entry) leaves that one as device 0. */
#include <stdlib.h>

#include "cuda_dev.h"
#include "launch/launch_vars.h"
#include "twinrun/err.h"

int tr_cu_pick_device(int ordinal, int count, char *err, size_t errlen) {
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    const int base = v.launcher == TR_LAUNCHER_TORCHRUN || v.launcher == TR_LAUNCHER_OMPI ? v.local_rank : 0;
    if (count == 1 && ordinal == 0) return 0;
    if (ordinal < 0 || base + ordinal >= count) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return tr_errf(err, errlen,
                       "dev_open: this process is local rank %d (%s) and asks for its device %d, but it sees %d "
                       "GPU(s)%s%s%s: start at most %d processes per node (GPUS_PER_NODE, torchrun's --nproc_per_node, "
                       "the hostfile's slots) or fix CUDA_VISIBLE_DEVICES",
                       base, tr_launcher_name(v.launcher), ordinal, count, vis ? " (CUDA_VISIBLE_DEVICES=" : "",
                       vis ? vis : "", vis ? ")" : "", count);
    }
    return base + ordinal;
}
