/*
 * train/cpu/embed.c — token embedding lookup and its gradient (Llama `embed_tokens`,
 * torch.nn.Embedding): out[t] = wte[ids[t]], dwte[ids[t]] += dout[t]; ids[t] < 0 is a token
 * outside this tensor-parallel rank's vocabulary rows (a zero row, no gradient).
 */
#include <string.h>

#include "train/cpu/kernels.h"

void lt_embed_forward(float *out, const int32_t *ids, int T, const float *wte, int C) {
    for (int t = 0; t < T; t++) {
        if (ids[t] < 0) memset(out + (size_t)t * C, 0, (size_t)C * sizeof *out);
        else memcpy(out + (size_t)t * C, wte + (size_t)ids[t] * C, (size_t)C * sizeof *out);
    }
}

/* Serial: a token id may repeat, and the order of the adds into its row must not depend on
 * threads. */
void lt_embed_backward(float *dwte, const float *dout, const int32_t *ids, int T, int C) {
    for (int t = 0; t < T; t++) {
        if (ids[t] < 0) continue;
        float *row = dwte + (size_t)ids[t] * C;
        const float *g = dout + (size_t)t * C;
        for (int c = 0; c < C; c++) row[c] += g[c];
    }
}
