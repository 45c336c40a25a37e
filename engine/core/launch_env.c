/* The launcher's world size, read the same way by both builds (engine/launch/launch_vars.h says
 * which variables win). */
#include "launch/launch_vars.h"
#include "twinrun/launch.h"

int launch_world_size(char *err, size_t errlen) {
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    return v.world;
}
