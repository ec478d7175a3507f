/* SPDX-License-Identifier: MIT */
/*
 * Goodput accounting, pure (DESIGN.md §2: health/ holds it). A job's life from
 * submission to its end is cut into segments, each in exactly one bucket: productive
 * training, or badput by cause (docs/GOODPUT.md defines each). The controller fills a
 * GoodputJob from what it records per attempt; nothing here reads a clock: `now` is
 * passed in. The checkpoint advice (Young/Daly) lives here too.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "states.h"

typedef enum GoodputBucket {
        GOODPUT_PRODUCTIVE, /* training whose result survived */
        GOODPUT_QUEUEING, /* waiting for a first placement, or again after a preemption */
        GOODPUT_STARTUP, /* placement to the first progress of an attempt */
        GOODPUT_LOST_WORK, /* progress after the last checkpoint that a failure threw away */
        GOODPUT_DETECTION, /* the failure happened to the controller noticing it */
        GOODPUT_RESTART, /* noticed to the next attempt's placement */
        GOODPUT_HANG, /* last progress to the hang verdict */
        GOODPUT_PREEMPTION, /* progress after the last checkpoint that a preemption threw away */
        GOODPUT_CHECKPOINT, /* training stalled while a checkpoint was written */
        _GOODPUT_BUCKET_MAX,
        _GOODPUT_BUCKET_INVALID = -1,
} GoodputBucket;

const char *goodput_bucket_to_string(GoodputBucket b);

/* What the controller recorded of one attempt; wall-clock ms, 0 where nothing was seen. */
typedef struct GoodputAttempt {
        int attempt;
        int64_t started_ms; /* placed */
        int64_t running_ms; /* every rank running */
        int64_t first_progress_ms, last_progress_ms; /* the step advanced */
        int64_t last_ckpt_ms; /* the newest checkpoint this attempt committed */
        int64_t ckpt_stall_ms; /* measured checkpoint cost within it: a sum of noisy
                                * samples, counted as 0 when negative */
        int64_t failed_ms; /* when the failure happened by the evidence (a lost node's last
                            * sync); 0: when it was noticed */
        int64_t ended_ms; /* noticed, or ended; 0 while live */
        EndReason ended_for; /* why it ended; _END_REASON_INVALID while live */
} GoodputAttempt;

typedef struct GoodputJob {
        int64_t created_ms;
        int64_t finished_ms; /* 0: not finished */
        const GoodputAttempt *attempts; /* in order */
        int n_attempts;
} GoodputJob;

typedef struct GoodputSegment {
        GoodputBucket bucket;
        int attempt; /* the attempt it belongs to, or follows; 0 before the first */
        int64_t from_ms, to_ms;
        int64_t ckpt_ms; /* productive segments: the part of it spent on checkpoints */
} GoodputSegment;

/*
 * Cuts the job's time from created_ms to its end (or now_ms) into segments in time
 * order, without gaps or overlaps: they sum to the elapsed time exactly. Returns a
 * malloc'd array and its length in *ret_n.
 */
GoodputSegment *goodput_timeline(const GoodputJob *job, int64_t now_ms, int *ret_n);

/* Per bucket, in ms (or ms × a weight, such as the job's accelerators). */
typedef struct GoodputTotals {
        int64_t ms[_GOODPUT_BUCKET_MAX];
        int64_t elapsed_ms; /* the sum of ms[] */
} GoodputTotals;

/*
 * Adds the part of each segment inside [since_ms, until_ms) to t, times weight; the
 * checkpoint share of a productive segment counts as checkpoint time, in proportion to
 * the part inside the window.
 */
void goodput_totals_add(GoodputTotals *t, const GoodputSegment *s, int n, int64_t since_ms,
                        int64_t until_ms, int64_t weight);
/* Allocated time: everything but queueing (the job held, or was recovering, its place). */
int64_t goodput_allocated_ms(const GoodputTotals *t);
/* productive ÷ allocated, in [0, 1]; -1 when nothing was allocated yet. */
double goodput_ratio(const GoodputTotals *t);

/* What the checkpoint advice is computed from, measured (seconds). */
typedef struct GoodputAdviceInput {
        double interval_s; /* mean time between checkpoints; 0: none measured */
        double cost_s; /* mean cost of one checkpoint; 0: none measured */
        double mtbf_s; /* mean time between interruptions of this job at its size */
        double recovery_s; /* mean time an interruption costs besides lost work */
} GoodputAdviceInput;

typedef struct GoodputAdvice {
        double advised_interval_s; /* Young/Daly: sqrt(2 · cost · MTBF) */
        double expected_current; /* expected goodput at the measured interval; -1: unknown */
        double expected_advised; /* and at the advised one */
} GoodputAdvice;

/*
 * The expected goodput of checkpointing every interval_s (first order, as Young and
 * Daly): a period of interval + cost yields interval of training, and each interruption,
 * one per MTBF, costs the recovery plus half a period of lost work. In [0, 1].
 */
double goodput_expected(double interval_s, double cost_s, double mtbf_s, double recovery_s);
/* Fills *ret; false (nothing advised) when the cost or the MTBF is not known. */
bool goodput_advise(const GoodputAdviceInput *in, GoodputAdvice *ret);
