/* SPDX-License-Identifier: MIT */
/* Histograms and Prometheus text output; see metrics.h. */
#include "metrics.h"

static const double latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                        0.25,   0.5,   1,      2.5,   5,    10,    30,   60};

void histogram_init_latency(Histogram *h) {
        *h = (Histogram){.n_bounds = (int) (sizeof(latency_bounds) / sizeof(latency_bounds[0]))};
        for (int i = 0; i < h->n_bounds; i++)
                h->bounds[i] = latency_bounds[i];
}

void histogram_observe(Histogram *h, double value) {
        int i = 0;
        while (i < h->n_bounds && value > h->bounds[i])
                i++;
        h->counts[i]++;
        h->sum += value;
        h->count++;
}

void metrics_write_header(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_write_histogram(FILE *f, const char *name, const char *labels, const Histogram *h) {
        const char *sep = labels && *labels ? "," : "";
        uint64_t cumulative = 0;
        for (int i = 0; i < h->n_bounds; i++) {
                cumulative += h->counts[i];
                fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels ? labels : "", sep,
                        h->bounds[i], (unsigned long long) cumulative);
        }
        cumulative += h->counts[h->n_bounds];
        fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels ? labels : "", sep,
                (unsigned long long) cumulative);
        if (labels && *labels) {
                fprintf(f, "%s_sum{%s} %.6f\n", name, labels, h->sum);
                fprintf(f, "%s_count{%s} %llu\n", name, labels, (unsigned long long) h->count);
        } else {
                fprintf(f, "%s_sum %.6f\n", name, h->sum);
                fprintf(f, "%s_count %llu\n", name, (unsigned long long) h->count);
        }
}
