/* SPDX-License-Identifier: MIT */
/*
 * Transient systemd scopes for ranks; see cgroup-scope.h. A start is a job of systemd's:
 * the method call returns the job's object path, and the JobRemoved signal with that
 * path says how it ended. The match for that signal is installed before the call, so
 * a job that ends at once is not missed.
 */
#include "cgroup-scope.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"
/* The longest the agent's loop waits for systemd, per call and per job, µs. */
#define CGROUP_SCOPE_TIMEOUT_US (5 * 1000 * 1000)

int cgroup_scope_connect(sd_bus **ret) {
        sd_bus *bus = NULL;
        int r = -EACCES;
        /* What systemctl uses as root: no dbus-daemon needed, and systemd's own. */
        if (geteuid() == 0 && sd_bus_new(&bus) >= 0) {
                r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
                if (r >= 0)
                        r = sd_bus_start(bus);
                if (r < 0)
                        bus = sd_bus_unref(bus);
        }
        if (!bus && (r = sd_bus_open_system(&bus)) < 0)
                return r;
        /* On the system bus systemd sends job signals only to subscribers. */
        sd_bus_error error = SD_BUS_ERROR_NULL;
        r = sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "Subscribe", &error, NULL, "");
        sd_bus_error_free(&error);
        if (r < 0) {
                sd_bus_flush_close_unref(bus);
                return r;
        }
        *ret = bus;
        return 0;
}

typedef struct ScopeJob {
        char *path; /* the job to wait for; NULL until the call returned it */
        char *result; /* its JobRemoved result, once seen */
} ScopeJob;

static int scope_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        ScopeJob *job = userdata;
        uint32_t id;
        const char *path, *unit, *result;
        if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
                return 0;
        if (job->path && !job->result && strcmp(path, job->path) == 0)
                job->result = xstrdup(result);
        return 0;
}

/* Sends m (a call that returns a job), then waits for the job to end; 0 when it ended
 * "done". */
static int scope_call_job(sd_bus *bus, sd_bus_message *m) {
        ScopeJob job = {0};
        sd_bus_slot *slot = NULL;
        /* A direct connection's messages carry no sender to match. */
        int r = sd_bus_match_signal(bus, &slot, sd_bus_is_bus_client(bus) ? SD_DEST : NULL, SD_PATH,
                                    SD_MANAGER, "JobRemoved", scope_job_removed, &job);
        if (r < 0)
                return r;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        r = sd_bus_call(bus, m, CGROUP_SCOPE_TIMEOUT_US, &error, &reply);
        const char *path = NULL;
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0)
                job.path = xstrdup(path);
        else if (sd_bus_error_has_name(&error, "org.freedesktop.systemd1.UnitExists"))
                r = -EEXIST;
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
        int64_t deadline = util_now_ms() + CGROUP_SCOPE_TIMEOUT_US / 1000;
        while (r >= 0 && !job.result) {
                r = sd_bus_process(bus, NULL);
                if (r > 0)
                        continue;
                int64_t left = deadline - util_now_ms();
                if (r == 0 && left <= 0)
                        r = -ETIMEDOUT;
                else if (r == 0)
                        r = sd_bus_wait(bus, (uint64_t) left * 1000);
        }
        if (r >= 0)
                r = strcmp(job.result, "done") == 0 ? 0 : -EIO;
        sd_bus_slot_unref(slot);
        free(job.path);
        free(job.result);
        return r;
}

int cgroup_scope_slice_start(sd_bus *bus, const char *slice, char **ret_path) {
        sd_bus_message *m = NULL;
        int r = sd_bus_message_new_method_call(bus, &m, SD_DEST, SD_PATH, SD_MANAGER, "StartUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", slice, "replace");
        if (r >= 0)
                r = scope_call_job(bus, m);
        sd_bus_message_unref(m);
        if (r < 0)
                return r;
        _cleanup_free_ char *object = NULL;
        r = sd_bus_path_encode(SD_PATH "/unit", slice, &object);
        if (r < 0)
                return r;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        char *path = NULL;
        r = sd_bus_get_property_string(bus, SD_DEST, object, "org.freedesktop.systemd1.Slice",
                                       "ControlGroup", &error, &path);
        sd_bus_error_free(&error);
        if (r < 0)
                return r;
        if (!path || path[0] != '/') {
                free(path);
                return -ENOENT; /* an inactive unit has no cgroup */
        }
        *ret_path = path;
        return 0;
}

char *cgroup_scope_escape(const char *name) {
        size_t n = strlen(name);
        char *out = xmalloc(n * 4 + 1), *o = out;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) name[i];
                bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '_' || c == '-' || (c == '.' && i > 0);
                if (plain)
                        *o++ = (char) c;
                else
                        o += sprintf(o, "\\x%02x", c);
        }
        *o = '\0';
        return out;
}

int cgroup_scope_start(sd_bus *bus, const char *unit, const char *slice, pid_t pid, int cpus,
                       int64_t memory_mb) {
        sd_bus_message *m = NULL;
        int r = sd_bus_message_new_method_call(bus, &m, SD_DEST, SD_PATH, SD_MANAGER,
                                               "StartTransientUnit");
        /* "fail": never replace a job systemd has for a unit of that name. */
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)", "Description", "s",
                                          "axctl rank", "Slice", "s", slice, "Delegate", "b", 1,
                                          "PIDs", "au", 1, (uint32_t) pid,
                                          /* A rank the OOM killer ended must not linger as a
                                           * failed unit. */
                                          "CollectMode", "s", "inactive-or-failed");
        if (r >= 0 && cpus > 0)
                r = sd_bus_message_append(m, "(sv)", "CPUQuotaPerSecUSec", "t",
                                          (uint64_t) cpus * 1000 * 1000);
        if (r >= 0 && memory_mb > 0)
                r = sd_bus_message_append(m, "(sv)(sv)", "MemoryMax", "t",
                                          (uint64_t) memory_mb * 1024 * 1024, "MemorySwapMax", "t",
                                          (uint64_t) 0);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r >= 0)
                r = scope_call_job(bus, m);
        sd_bus_message_unref(m);
        return r;
}
