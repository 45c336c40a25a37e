/* The input embedding's lookup of a pending AdamW update (twinrun/kern.h, kern_embedding_forward_adamw):
 * the step ahead of the next forward pass (engine/optim) updates the table after this has read the rows
 * the next micro-batch needs, so the forward pass starts without waiting for the whole table's update
 * (at 128256 x 8192 a tenth of a 70B layer pair's optimizer step). One block per token row; each element
 * is adamw_math's, as the update's kernels compute it (kern_optim_common.cuh: the same bits), stored into
 * out as the model's copy would hold it and the slice's lookup would read it. Nothing is written back. */
#include <math.h>

#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_optim_common.cuh"

__global__ void k_embedding_adamw_fwd(tr_buf out, const int32_t *tokens, const float *master, const int16_t *rem,
                                      tr_buf wte, tr_buf grad, const float *m, const float *v, int vocab_start, int C,
                                      int V, double b1, double b2, double lr, double eps, double decay, double ibc1,
                                      double ibc2, double grad_scale) {
    const int n = blockIdx.x;
    const int32_t tok = tokens[n];
    if (tok < 0) {
        if (threadIdx.x == 0)
            TR_DEVICE_FAIL("embedding forward (pending update): token %d at row %d is negative; check --vocab-size "
                           "and the tokenizer that wrote the data\n",
                           (int)tok, n);
        return;
    }
    const long long row = (long long)tok - (long long)vocab_start;
    const size_t dst = (size_t)n * (size_t)C;
    if (row < 0 || row >= (long long)V) { /* another rank's row: the tensor-parallel all-reduce adds it */
        for (int c = threadIdx.x; c < C; c += blockDim.x) stf(out, dst + c, 0.0f);
        return;
    }
    const bool fp32_model = wte.p == (const void *)master;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const size_t i = (size_t)row * (size_t)C + c;
        float mi = m[i], vi = v[i], w = rem ? tr_master_join(((const uint16_t *)wte.p)[i], rem[i]) : master[i];
        adamw_math(ldf(grad, i), &mi, &vi, &w, b1, b2, lr, eps, decay, ibc1, ibc2, grad_scale);
        float model_value = w; /* as master_store leaves the model's copy */
        if (rem) {
            uint16_t hi;
            int16_t r;
            tr_master_split(w, &hi, &r);
            model_value = tr_bf16_bits_to_f32(hi);
        } else if (!fp32_model && wte.dt == TR_BF16) {
            model_value = tr_bf16_bits_to_f32(tr_f32_to_bf16_bits(w));
        }
        stf(out, dst + c, model_value);
    }
}

extern "C" void kern_embedding_forward_adamw(dev_stream *s, tr_buf out, const int32_t *tokens,
                                             const kern_adamw_desc *ad, const float *master, const int16_t *master_rem,
                                             tr_buf wte, tr_buf grad, const float *m, const float *v, int vocab_start,
                                             int N, int C, int V) {
    TR_PROF(s, "embedding_forward_adamw");
    kern_embedding_forward_adamw_check(s, out, tokens, ad, master, master_rem, wte, grad, m, v, vocab_start, N, C, V);
    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr;
    const double ibc1 = 1.0 / (1.0 - pow(b1, (double)ad->step)), ibc2 = 1.0 / (1.0 - pow(b2, (double)ad->step));
    const double decay = 1.0 - lr * (double)ad->weight_decay;
    k_embedding_adamw_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, tokens, master, master_rem, wte, grad, m, v,
                                                               vocab_start, C, V, b1, b2, lr, (double)ad->eps, decay,
                                                               ibc1, ibc2, (double)ad->grad_scale);
    CU_CHECK_LAUNCH("k_embedding_adamw_fwd");
}
