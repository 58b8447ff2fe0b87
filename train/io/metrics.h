/*
 * train/io/metrics.h — what `trainer train --db` leaves beside its checkpoints for people and
 * tools: OUT/metrics.jsonl, one JSON object per optimizer step (appended as the step ends),
 * and OUT/loss.svg, the loss curve drawn from it.
 *
 * A metrics line (keys in this order; numbers in C-locale %.9g, integers as integers):
 *   {"step":S,"plan_step":P,"loss":L,"lr":LR,"grad_norm":G,"tokens":T,"predicted":N,
 *    "seconds":DT,"predicted_ms":PM}
 * step = optimizer steps done after this one (1, 2, ...), plan_step = the stored step the
 * plan executor ran, loss = the step's mean next-token loss before the update, predicted =
 * its loss denominator, seconds = measured wall time of the step, predicted_ms = the plan's
 * predicted step time (of the planned GPUs: not comparable with a CPU step).
 *
 * A validation line (train.eval_every; after the step line of the same step):
 *   {"step":S,"val_loss":V,"val_tokens":T,"val_docs":D}
 * step = optimizer steps done when the model was scored (0: before the first update),
 * val_loss = the mean next-token loss over the first D held-out documents of the plan file
 * (train/cmd/eval.c), val_tokens = its denominator (predicted tokens).
 */
#ifndef LT_TRAIN_METRICS_H
#define LT_TRAIN_METRICS_H

#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

typedef struct lt_metrics_row {
    int64_t step;
    uint64_t plan_step;
    double loss, lr, grad_norm;
    int64_t tokens, n_predicted;
    double seconds, predicted_ms;
} lt_metrics_row;

/* Append one line to DIR/metrics.jsonl (created if missing), flushed and synced. LT_ERR_IO
 * naming the file. */
lt_status lt_metrics_append(const char *dir, const lt_metrics_row *row, lt_error *err);

/* Append one validation line (the same file and rules). */
lt_status lt_metrics_append_val(const char *dir, int64_t step, double val_loss, int64_t val_tokens, int64_t val_docs,
                                lt_error *err);

/* Keep only the lines of DIR/metrics.jsonl with step <= max_step (a resumed run continues
 * from a checkpoint at max_step: the steps after it are redone and logged again). The file
 * is rewritten atomically; a missing file is fine. LT_ERR_IO; LT_ERR_INPUT for a line that
 * is not a metrics line (naming file and line). */
lt_status lt_metrics_trim(const char *dir, int64_t max_step, lt_error *err);

/* Draw DIR/loss.svg (loss against step, written atomically) from DIR/metrics.jsonl: the
 * training loss of every step and, when the file has validation lines, the validation loss
 * as a second curve on the same axes, with a legend. */
lt_status lt_metrics_svg(const char *dir, lt_error *err);

#endif /* LT_TRAIN_METRICS_H */
