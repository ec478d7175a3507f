/* SPDX-License-Identifier: MIT */
/*
 * The rank environment of DESIGN.md §6 that the controller knows: identity, topology
 * of the gang, coordinator, checkpoint and resume, framework conventions, and the job's
 * own env. Device visibility and launch profiles are added by the agent's accelerator
 * backend, which knows the vendor.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "controller-internal.h"
#include "util.h"

/* The host part of "host:port" (IPv6 "[::1]:80" gives "::1"). */
static char *address_host(const char *address, const char *fallback) {
        if (!address || !*address)
                return xstrdup(fallback ? fallback : "127.0.0.1");
        if (address[0] == '[') {
                const char *end = strchr(address, ']');
                return end ? strndup(address + 1, (size_t) (end - address - 1)) : xstrdup(address);
        }
        const char *colon = strrchr(address, ':');
        return colon ? strndup(address, (size_t) (colon - address)) : xstrdup(address);
}

/*
 * A port for the gang's coordinator, different for concurrent jobs and for successive
 * attempts (a restarted coordinator must not collide with a socket in TIME_WAIT).
 */
static int coordinator_port(const Job *job) {
        return 20000 + (int) ((job->id * 16 + job->attempt) % 20000);
}

static void set(json_t *env, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void set(json_t *env, const char *key, const char *fmt, ...) {
        char buf[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        json_object_set_new(env, key, json_string(buf));
}

json_t *ctl_rank_env(Controller *ctl, Job *job, Rank *rank) {
        json_t *env = json_object();
        Attempt *a = job_current_attempt(job);
        int num_nodes = 0, local_world = 0;
        for (int i = 0; i < job->n_ranks; i++) {
                if (job->ranks[i].node_rank + 1 > num_nodes)
                        num_nodes = job->ranks[i].node_rank + 1;
                if (job->ranks[i].node_rank == rank->node_rank)
                        local_world++;
        }
        /* Hosts in node-rank order: the first rank of each node names its host. */
        char **hosts = xcalloc((size_t) num_nodes + 1, sizeof(char *));
        for (int i = 0; i < job->n_ranks; i++) {
                Rank *r = &job->ranks[i];
                if (hosts[r->node_rank])
                        continue;
                Node *node = ctl_node_find(ctl, r->node_name);
                hosts[r->node_rank] =
                        address_host(node ? node->address : NULL, node ? node->hostname : NULL);
        }
        size_t hosts_len = 1;
        for (int i = 0; i < num_nodes; i++)
                hosts_len += strlen(hosts[i] ? hosts[i] : "") + 1;
        char *host_list = xcalloc(hosts_len, 1);
        for (int i = 0; i < num_nodes; i++) {
                if (i)
                        strcat(host_list, ",");
                strcat(host_list, hosts[i] ? hosts[i] : "");
        }
        const char *coord_host = hosts[0] ? hosts[0] : "127.0.0.1";
        int port = coordinator_port(job);

        set(env, "AXCTL_JOB_ID", "%lld", (long long) job->id);
        set(env, "AXCTL_JOB_NAME", "%s", job->spec->name);
        set(env, "AXCTL_ATTEMPT", "%d", rank->attempt);
        set(env, "AXCTL_RESTART_COUNT", "%d", rank->attempt - 1);
        set(env, "AXCTL_RANK", "%d", rank->rank);
        set(env, "AXCTL_WORLD_SIZE", "%d", job->n_ranks);
        set(env, "AXCTL_LOCAL_RANK", "%d", rank->local_rank);
        set(env, "AXCTL_LOCAL_WORLD_SIZE", "%d", local_world);
        set(env, "AXCTL_NODE_RANK", "%d", rank->node_rank);
        set(env, "AXCTL_NUM_NODES", "%d", num_nodes);
        set(env, "AXCTL_NODE_HOSTNAMES", "%s", host_list);
        set(env, "AXCTL_COORDINATOR", "%s:%d", coord_host, port);
        set(env, "AXCTL_CHECKPOINT_DIR", "%s",
            job->spec->checkpoint_dir ? job->spec->checkpoint_dir : "");
        if (a && a->resume_step > 0) {
                set(env, "AXCTL_RESUME_STEP", "%lld", (long long) a->resume_step);
                set(env, "AXCTL_RESUME_CHECKPOINT", "%s", a->resume_path ? a->resume_path : "");
        } else {
                /* Empty, not "0": a fresh start has no step to resume (DESIGN.md §6). */
                set(env, "AXCTL_RESUME_STEP", "%s", "");
                set(env, "AXCTL_RESUME_CHECKPOINT", "%s", "");
        }
        switch (job->spec->framework) {
        case FRAMEWORK_TORCH:
                set(env, "MASTER_ADDR", "%s", coord_host);
                set(env, "MASTER_PORT", "%d", port);
                set(env, "RANK", "%d", rank->rank);
                set(env, "WORLD_SIZE", "%d", job->n_ranks);
                set(env, "LOCAL_RANK", "%d", rank->local_rank);
                set(env, "LOCAL_WORLD_SIZE", "%d", local_world);
                set(env, "GROUP_RANK", "%d", rank->node_rank);
                break;
        case FRAMEWORK_JAX:
                set(env, "JAX_COORDINATOR_ADDRESS", "%s:%d", coord_host, port);
                set(env, "DISTRIBUTED_COORDINATOR", "%s:%d", coord_host, port);
                set(env, "NUM_PROCESSES", "%d", job->n_ranks);
                set(env, "PROCESS_ID", "%d", rank->rank);
                break;
        default:
                break;
        }
        /* The job's own variables win over framework defaults (never over AXCTL_*,
         * which the spec parser refuses). */
        json_object_update(env, job->spec->env);
        for (int i = 0; i < num_nodes; i++)
                free(hosts[i]);
        free(hosts);
        free(host_list);
        return env;
}
