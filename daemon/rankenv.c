/* SPDX-License-Identifier: MIT */
/*
 * The rank environment of DESIGN.md §6 that the controller knows: identity, topology
 * of the gang, coordinator, checkpoint and resume, framework conventions, and the job's
 * own env. Device visibility and launch profiles are added by the agent's accelerator
 * backend, which knows the vendor.
 */
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

/* A number's text, kept in env for as long as the variable that shows it. */
static const char *number(RankEnv *env, int64_t v) {
        if (env->n_numbers >= RANK_ENV_MAX_NUMBERS)
                abort(); /* the set below is fixed: more is a bug here */
        char *buf = env->numbers[env->n_numbers++];
        snprintf(buf, sizeof(env->numbers[0]), "%lld", (long long) v);
        return buf;
}

static void set(RankEnv *env, const char *key, const char *value) {
        GROW(env->vars, env->n_vars, env->cap_vars);
        env->vars[env->n_vars++] = (WireEnvVar){key, value};
}

/* A framework default, unless the job sets the variable itself: the job's own win. */
static void set_default(RankEnv *env, const JobSpec *spec, const char *key, const char *value) {
        if (!json_object_get(spec->env, key))
                set(env, key, value);
}

/* The gang's part of the environment, built again when the attempt or an address changed. */
static const JobGang *job_gang(Controller *ctl, Job *job) {
        JobGang *g = &job->gang;
        if (g->attempt == job->attempt && g->addresses == ctl->model.addresses_changed && g->hosts)
                return g;
        job_gang_clear(g);
        g->attempt = job->attempt;
        g->addresses = ctl->model.addresses_changed;
        for (int i = 0; i < job->n_ranks; i++)
                if (job->ranks[i].node_rank + 1 > g->num_nodes)
                        g->num_nodes = job->ranks[i].node_rank + 1;
        g->local_world = xcalloc((size_t) g->num_nodes + 1, sizeof(int));
        /* Hosts in node-rank order: the first rank of each node names its host. */
        char **hosts = xcalloc((size_t) g->num_nodes + 1, sizeof(char *));
        for (int i = 0; i < job->n_ranks; i++) {
                Rank *r = &job->ranks[i];
                if (r->node_rank < 0)
                        continue;
                g->local_world[r->node_rank]++;
                if (hosts[r->node_rank])
                        continue;
                Node *node = ctl_node_find(ctl, r->node_name);
                hosts[r->node_rank] =
                        address_host(node ? node->address : NULL, node ? node->hostname : NULL);
        }
        /* Whole, however long: past what the agent takes (WIRE_MAX_STRING) the rank fails
         * to start and says why, where a list cut short would start a wrong gang. */
        size_t hosts_len = 1;
        for (int i = 0; i < g->num_nodes; i++)
                hosts_len += strlen(hosts[i] ? hosts[i] : "") + 1;
        g->hosts = xcalloc(hosts_len, 1);
        char *end = g->hosts;
        for (int i = 0; i < g->num_nodes; i++) {
                if (i)
                        *end++ = ',';
                end = stpcpy(end, hosts[i] ? hosts[i] : "");
        }
        g->first_host = xstrdup(g->num_nodes > 0 && hosts[0] ? hosts[0] : "127.0.0.1");
        for (int i = 0; i < g->num_nodes; i++)
                free(hosts[i]);
        free(hosts);
        g->coordinator = xasprintf("%s:%d", g->first_host, coordinator_port(job));
        return g;
}

void ctl_rank_env(Controller *ctl, Job *job, Rank *rank, RankEnv *env) {
        JobSpec *spec = job->spec;
        Attempt *a = job_current_attempt(job);
        const JobGang *g = job_gang(ctl, job);
        env->n_vars = env->n_numbers = 0;
        int local_world = rank->node_rank >= 0 && rank->node_rank < g->num_nodes
                                  ? g->local_world[rank->node_rank]
                                  : 0;
        set(env, "AXCTL_NODE_HOSTNAMES", g->hosts); /* the RANK_ENV_SHARED */
        const char *rank_text = number(env, rank->rank), *world = number(env, job->n_ranks),
                   *local_rank = number(env, rank->local_rank),
                   *local_world_text = number(env, local_world),
                   *node_rank = number(env, rank->node_rank);
        set(env, "AXCTL_JOB_ID", number(env, job->id));
        set(env, "AXCTL_JOB_NAME", spec->name);
        set(env, "AXCTL_ATTEMPT", number(env, rank->attempt));
        set(env, "AXCTL_RESTART_COUNT", number(env, rank->attempt - 1));
        set(env, "AXCTL_RANK", rank_text);
        set(env, "AXCTL_WORLD_SIZE", world);
        set(env, "AXCTL_LOCAL_RANK", local_rank);
        set(env, "AXCTL_LOCAL_WORLD_SIZE", local_world_text);
        set(env, "AXCTL_NODE_RANK", node_rank);
        set(env, "AXCTL_NUM_NODES", number(env, g->num_nodes));
        set(env, "AXCTL_COORDINATOR", g->coordinator);
        set(env, "AXCTL_CHECKPOINT_DIR", spec->checkpoint_dir ? spec->checkpoint_dir : "");
        if (a && a->resume_step > 0) {
                set(env, "AXCTL_RESUME_STEP", number(env, a->resume_step));
                set(env, "AXCTL_RESUME_CHECKPOINT", a->resume_path ? a->resume_path : "");
        } else {
                /* Empty, not "0": a fresh start has no step to resume (DESIGN.md §6). */
                set(env, "AXCTL_RESUME_STEP", "");
                set(env, "AXCTL_RESUME_CHECKPOINT", "");
        }
        switch (spec->framework) {
        case FRAMEWORK_TORCH:
                set_default(env, spec, "MASTER_ADDR", g->first_host);
                set_default(env, spec, "MASTER_PORT", number(env, coordinator_port(job)));
                set_default(env, spec, "RANK", rank_text);
                set_default(env, spec, "WORLD_SIZE", world);
                set_default(env, spec, "LOCAL_RANK", local_rank);
                set_default(env, spec, "LOCAL_WORLD_SIZE", local_world_text);
                set_default(env, spec, "GROUP_RANK", node_rank);
                break;
        case FRAMEWORK_JAX:
                set_default(env, spec, "JAX_COORDINATOR_ADDRESS", g->coordinator);
                set_default(env, spec, "DISTRIBUTED_COORDINATOR", g->coordinator);
                set_default(env, spec, "NUM_PROCESSES", world);
                set_default(env, spec, "PROCESS_ID", rank_text);
                break;
        default:
                break;
        }
        /* The job's own variables. The spec parser refuses AXCTL_*; skipped here too,
         * as a key written twice would make the agent refuse the node's whole answer. */
        const char *key;
        json_t *value;
        json_object_foreach(spec->env, key, value) {
                if (strncmp(key, "AXCTL_", 6) != 0)
                        set(env, key, json_string_value(value));
        }
}

void ctl_rank_env_clear(RankEnv *env) {
        free(env->vars);
        *env = (RankEnv){0};
}
