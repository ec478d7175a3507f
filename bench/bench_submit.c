/* SPDX-License-Identifier: MIT */
/*
 * Submit throughput: C concurrent clients, each on its own keep-alive connection,
 * POST job specs to a running axctld as fast as it acknowledges them (every 2xx is a
 * durable write). Prints acknowledged submits per second and latency percentiles.
 *
 *   bench_submit URL [CLIENTS=8] [SUBMITS_PER_CLIENT=2000]
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct Client {
        const char *url;
        int n;
        int id;
        int ok;
        int failed;
        double *latency_ms;
} Client;

static size_t discard(char *p, size_t s, size_t n, void *u) {
        return s * n;
}

static void *client_run(void *p) {
        Client *c = p;
        CURL *h = curl_easy_init();
        char url[512];
        snprintf(url, sizeof(url), "%s/v1/jobs", c->url);
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        /* A job no node can run yet: the bench measures the submit path alone. */
        char body[256];
        for (int i = 0; i < c->n; i++) {
                snprintf(body, sizeof(body),
                         "{\"name\":\"bench-%d-%d\",\"command\":[\"true\"],\"ranks\":1,"
                         "\"project\":\"bench\"}",
                         c->id, i);
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
                int64_t t0 = util_now_ms();
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                CURLcode rc = curl_easy_perform(h);
                clock_gettime(CLOCK_MONOTONIC, &b);
                (void) t0;
                long code = 0;
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
                c->latency_ms[i] = (double) (b.tv_sec - a.tv_sec) * 1e3 +
                                   (double) (b.tv_nsec - a.tv_nsec) / 1e6;
                if (rc == CURLE_OK && code == 201)
                        c->ok++;
                else
                        c->failed++;
        }
        curl_slist_free_all(hdr);
        curl_easy_cleanup(h);
        return NULL;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: bench_submit URL [CLIENTS] [SUBMITS_PER_CLIENT]\n");
                return 2;
        }
        int clients = argc > 2 ? atoi(argv[2]) : 8, per = argc > 3 ? atoi(argv[3]) : 2000;
        if (clients < 1 || per < 1) {
                fprintf(stderr, "bench_submit: CLIENTS and SUBMITS_PER_CLIENT must be positive\n");
                return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        Client *cs = xcalloc((size_t) clients, sizeof(Client));
        pthread_t *th = xcalloc((size_t) clients, sizeof(pthread_t));
        double *lat = xcalloc((size_t) clients * (size_t) per, sizeof(double));
        int64_t t0 = util_now_ms();
        for (int i = 0; i < clients; i++) {
                cs[i] = (Client){.url = argv[1],
                                 .n = per,
                                 .id = i,
                                 .latency_ms = lat + (size_t) i * (size_t) per};
                pthread_create(&th[i], NULL, client_run, &cs[i]);
        }
        int ok = 0, failed = 0;
        for (int i = 0; i < clients; i++) {
                pthread_join(th[i], NULL);
                ok += cs[i].ok;
                failed += cs[i].failed;
        }
        double secs = (double) (util_now_ms() - t0) / 1000.0;
        size_t n = (size_t) clients * (size_t) per;
        qsort(lat, n, sizeof(double), cmp_double);
        printf("clients %d, submits %zu, acknowledged %d, failed %d\n", clients, n, ok, failed);
        printf("throughput %.0f acknowledged submits/s over %.2f s\n", ok / secs, secs);
        printf("latency ms p50 %.2f p90 %.2f p99 %.2f max %.2f\n", lat[n / 2], lat[n * 9 / 10],
               lat[n * 99 / 100], lat[n - 1]);
        free(cs);
        free(th);
        free(lat);
        curl_global_cleanup();
        return failed ? 1 : 0;
}
