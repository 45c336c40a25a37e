/* Where and how much the flight recorder keeps, read alike by both builds:
 *   TWINRUN_FLIGHT_DIR      dumps go to DIR/flight_rank<R>.txt (twin: all ranks when the watchdog
 *                           fires; real backend: the rank whose watchdog fires)
 *   TWINRUN_FLIGHT_RECORDS  ring entries per rank (default 256; 1..16777216)
 *   TWINRUN_FLIGHT_AT_EXIT  1: also dump when the run ends normally, for trace comparisons
 *                           (lab/compare_flight.py) */
#ifndef TWINRUN_BASE_LAUNCH_FLIGHT_ENV_H
#define TWINRUN_BASE_LAUNCH_FLIGHT_ENV_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tr_flight_env {
    const char *dir; /* NULL: no dumps on disk */
    size_t records;
    bool at_exit;
} tr_flight_env;

int tr_launch_flight_env_read(tr_flight_env *out, char *err, size_t errlen);

#endif
