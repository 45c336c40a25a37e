/* Context parallelism's data movement (the Llama 3 paper's all-gathered K/V): each CP rank holds two
 * of the sequence's 2*CP chunks (Megatron's load balancing: chunks r and 2*CP-1-r), attends with its
 * queries over the keys and values of the whole sequence, and returns the key/value gradients of
 * every chunk to the rank that owns it. */
#include "model/llama.h"
#include "twinrun/err.h"

/* Copies between the CP-rank-major staging layout [CP, B, T, W] and the natural sequence order
 * [B, Tfull, W]; W elements per token. to_full: staging -> full, else full -> staging. */
static void cp_reorder(llama_model *m, void *full, void *staging, size_t W, tr_dtype dt, bool to_full) {
    const llama_dims *dm = &m->dims;
    const int cp = m->layout.cp, B = dm->B, T = dm->T, cl = T / 2;
    const size_t es = tr_dtype_size(dt), run = (size_t)cl * W * es;
    for (int r = 0; r < cp; r++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < 2; h++) {
                int chunk = h == 0 ? r : 2 * cp - 1 - r;
                char *st = (char *)staging + (((size_t)r * B + b) * T + (size_t)h * cl) * W * es;
                char *fu = (char *)full + ((size_t)b * dm->Tfull + (size_t)chunk * cl) * W * es;
                if (to_full) dev_copy_d2d(m->stream, fu, st, run);
                else dev_copy_d2d(m->stream, st, fu, run);
            }
}

/* full [B, Tfull, W] = this CP group's local [B, T, W] pieces in sequence order. */
void llama_cp_gather(llama_model *m, tr_buf full, tr_buf local, size_t W) {
    TR_CHECK(m->layout.cp > 1, "context-parallel gather at CP 1");
    size_t count = (size_t)m->dims.B * m->dims.T * W;
    coll_all_gather(m->cp_comm, m->stream, local.p, m->g.gather, count, local.dt);
    cp_reorder(m, full.p, m->g.gather, W, local.dt, true);
}

/* local [B, T, W] = sum over the CP group of the rows of full [B, Tfull, W] this rank owns. */
void llama_cp_reduce_scatter(llama_model *m, tr_buf local, tr_buf full, size_t W) {
    TR_CHECK(m->layout.cp > 1, "context-parallel reduce-scatter at CP 1");
    size_t count = (size_t)m->dims.B * m->dims.T * W;
    cp_reorder(m, full.p, m->g.gather, W, full.dt, false);
    coll_reduce_scatter(m->cp_comm, m->stream, m->g.gather, local.p, count, full.dt, COLL_SUM);
}
