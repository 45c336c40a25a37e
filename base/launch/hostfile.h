/* OpenMPI hostfiles, as the seeds write them: "train-node-000 slots=8" per line, '#' comments, blank
 * lines. One strict reader for the scenario runner (cluster.hostfile) and the doctor (--hostfile). */
#ifndef TWINRUN_BASE_LAUNCH_HOSTFILE_H
#define TWINRUN_BASE_LAUNCH_HOSTFILE_H

#include <stddef.h>

#define TR_HOST_NAME_LEN 128
#define TR_HOSTFILE_TEXT_MAX (8u << 20) /* bytes of a hostfile */
#define TR_HOSTFILE_HOSTS_MAX 65536

/* One host line: "node001 slots=8". */
typedef struct tr_host {
    char name[TR_HOST_NAME_LEN];
    int slots;
    int line; /* in the hostfile, for messages */
} tr_host;

/* "HOST [slots=N] [max_slots=N]" per line (a host without slots= is one slot, as OpenMPI counts it);
 * refused with "FILE:LINE: message": an unknown key, slots outside 1-65536, max_slots below slots, a key
 * given twice, a host on two lines, no hosts. Returns 0 with *hosts allocated (free it), or -1. */
int tr_launch_hostfile_parse(const char *text, size_t len, const char *name, tr_host **hosts, int *nhosts, char *err,
                             size_t errlen);

#endif
