/* Who started this process and where its job meets: the launcher's environment, parsed and checked.
 *
 *   torchrun style (torchrun, scripts/launch_llama3.sh, any launcher that sets LOCAL_RANK):
 *     RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (optional), MASTER_ADDR, MASTER_PORT
 *   OpenMPI (mpirun): OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; the rendezvous from
 *     MASTER_ADDR/MASTER_PORT when given (mpirun -x MASTER_ADDR -x MASTER_PORT), else, when every
 *     rank is on this host, 127.0.0.1:29500
 *   plain: WORLD_SIZE (and RANK) alone, as the twin reads them; no variables: a job of one.
 * Every launcher: TWINRUN_STORE_TOKEN, the job's secret that every client of the rendezvous store
 * proves it holds (16..256 printable characters; scripts/launch_llama3.sh generates one), and
 * TWINRUN_STORE_BIND, where rank 0's store listens when not on MASTER_ADDR ("*": every interface).
 * The innermost launcher wins: LOCAL_RANK marks torchrun style even under mpirun (mpirun starting
 * one torchrun per node); OMPI_COMM_WORLD_RANK wins over a RANK/WORLD_SIZE that a platform set
 * for the whole node (Kubeflow/AIStudio: WORLD_SIZE = nodes, RANK = node). */
#ifndef TWINRUN_BASE_LAUNCH_LAUNCH_VARS_H
#define TWINRUN_BASE_LAUNCH_LAUNCH_VARS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum tr_launcher {
    TR_LAUNCHER_NONE = 0,
    TR_LAUNCHER_PLAIN,
    TR_LAUNCHER_TORCHRUN,
    TR_LAUNCHER_OMPI
} tr_launcher;

#define TR_DEFAULT_MASTER_PORT 29500 /* torchrun's */

typedef struct tr_launch_vars {
    tr_launcher launcher;
    int rank, world;
    int local_rank, local_world; /* local_world 0: not given */
    bool has_master;             /* master_addr/port usable for the TCP rendezvous */
    char master_addr[256];
    int master_port;
    char store_token[257]; /* TWINRUN_STORE_TOKEN; "" when unset */
    char store_bind[256];  /* TWINRUN_STORE_BIND; "" when unset (listen on MASTER_ADDR) */
} tr_launch_vars;

/* name -> value or NULL, like getenv (tests and the fuzz target pass their own). */
typedef const char *(*tr_env_get)(const char *name, void *ctx);

/* Parses and checks the variables; -1 with err naming the variable, its value and the fix. */
int tr_launch_vars_parse(tr_env_get get, void *ctx, tr_launch_vars *out, char *err, size_t errlen);
/* The same over the process environment. */
int tr_launch_vars_from_env(tr_launch_vars *out, char *err, size_t errlen);
const char *tr_launcher_name(tr_launcher l); /* "none", "WORLD_SIZE", "torchrun", "mpirun" */

/* Parses "1".."65535" (MASTER_PORT); -1 with err. */
int tr_launch_parse_port(const char *name, const char *v, int *port, char *err, size_t errlen);

#endif
