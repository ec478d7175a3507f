/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text exposition helpers: cumulative histograms with fixed buckets and
 * writers for counters and gauges. Single-threaded, like the controller that owns them.
 */
#pragma once

#include <stdint.h>
#include <stdio.h>

#define METRICS_MAX_BUCKETS 16

typedef struct Histogram {
        int n_bounds;
        double bounds[METRICS_MAX_BUCKETS]; /* upper bounds, ascending; +Inf is implicit */
        uint64_t counts[METRICS_MAX_BUCKETS + 1];
        double sum;
        uint64_t count;
} Histogram;

/* Buckets in seconds from 0.5 ms to 60 s, for latencies. */
void histogram_init_latency(Histogram *h);
void histogram_observe(Histogram *h, double value);
/* Writes NAME_bucket{LABELS,le=..}, NAME_sum and NAME_count; labels may be "" */
void metrics_write_histogram(FILE *f, const char *name, const char *labels, const Histogram *h);
/* Writes "# HELP" and "# TYPE" lines. */
void metrics_write_header(FILE *f, const char *name, const char *type, const char *help);
