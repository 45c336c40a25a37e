/* Hostfiles of scenarios (cluster.hostfile): base's reader, which the doctor shares. */
#include "runner/scenario.h"

int scenario_hostfile_parse(const char *text, size_t len, const char *name, sc_host **hosts, int *nhosts, char *err,
                            size_t errlen) {
    return tr_launch_hostfile_parse(text, len, name, hosts, nhosts, err, errlen);
}
