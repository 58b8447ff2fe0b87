/*
 * train/cpu/embed.c — token embedding lookup and its gradient (Llama `embed_tokens`,
 * torch.nn.Embedding): out[t] = wte[ids[t]], dwte[ids[t]] += dout[t].
 */
#include <string.h>

#include "train/cpu/kernels.h"

void lt_embed_forward(float *out, const int32_t *ids, int T, const float *wte, int C) {
    for (int t = 0; t < T; t++)
        memcpy(out + (size_t)t * C, wte + (size_t)ids[t] * C, (size_t)C * sizeof *out);
}

/* Serial: a token id may repeat, and the order of the adds into its row must not depend on
 * threads. */
void lt_embed_backward(float *dwte, const float *dout, const int32_t *ids, int T, int C) {
    for (int t = 0; t < T; t++) {
        float *row = dwte + (size_t)ids[t] * C;
        const float *g = dout + (size_t)t * C;
        for (int c = 0; c < C; c++) row[c] += g[c];
    }
}
