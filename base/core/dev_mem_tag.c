/* The names of dev.h's allocation purposes, shared by both backends and the reports: the keys of the
 * predict report's JSON (docs/prediction.md). */
#include "twinrun/dev.h"

const char *dev_mem_tag_name(dev_mem_tag tag) {
    switch (tag) {
    case DEV_MEM_WORKSPACE: return "workspace";
    case DEV_MEM_WEIGHTS: return "weights";
    case DEV_MEM_MAIN_GRADS: return "main_grads";
    case DEV_MEM_OPTIMIZER: return "optimizer";
    case DEV_MEM_ACTIVATIONS: return "activations";
    case DEV_MEM_COMM: return "comm_buffers";
    case DEV_MEM_TAG_COUNT: break;
    }
    return "?";
}
