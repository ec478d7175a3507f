/* SPDX-License-Identifier: MIT */
/*
 * Project quotas: the operator's quota file and its normalisation against the live
 * fleet. The file is INI-like (docs/SCHEDULING.md has the full description):
 *
 *     [default]              # projects the file does not name
 *     share = 1
 *     [project foundation]
 *     share = 3              # relative share of every resource kind
 *     nvidia-h100 = 50%      # or, per kind, a percentage of the fleet's capacity
 *     cpus = 2               # or, per kind, a relative share for that kind only
 *
 * For each kind, percentages are taken first (scaled down together if they add up to
 * more than 100%); what is left is split among the other projects in proportion to their
 * shares, as AXLearn's bastion splits each resource type's limit among project shares.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "strmap.h"
#include "util.h"

#define QUOTA_MAX_NAME 128

typedef struct QuotaEntry {
        char *kind;
        double value;
        bool percent;
} QuotaEntry;

typedef struct QuotaProject {
        char *name;
        double share;
        QuotaEntry *entries;
        int n_entries;
} QuotaProject;

struct SchedQuota {
        QuotaProject *projects;
        int n_projects;
        QuotaProject defaults; /* share 1 and no entries unless [default] says otherwise */
        bool has_defaults;
};

static void project_clear(QuotaProject *p) {
        for (int i = 0; i < p->n_entries; i++)
                free(p->entries[i].kind);
        free(p->entries);
        free(p->name);
        *p = (QuotaProject){0};
}

SchedQuota *sched_quota_free(SchedQuota *q) {
        if (!q)
                return NULL;
        for (int i = 0; i < q->n_projects; i++)
                project_clear(&q->projects[i]);
        free(q->projects);
        project_clear(&q->defaults);
        free(q);
        return NULL;
}

static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
}

static bool name_valid(const char *s) {
        if (!*s || strlen(s) > QUOTA_MAX_NAME)
                return false;
        for (; *s; s++)
                if (!name_char(*s))
                        return false;
        return true;
}

static char *trim(char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
                s[--n] = '\0';
        return s;
}

/* Parses "3", "0.5" or "50%" (percent only when allowed). 0 or -EINVAL. */
static int parse_value(const char *s, bool allow_percent, double *ret, bool *ret_percent) {
        char *end = NULL;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno != 0 || !isfinite(v) || v < 0)
                return -EINVAL;
        while (*end == ' ' || *end == '\t')
                end++;
        bool percent = *end == '%';
        if (percent) {
                if (!allow_percent || v > 100)
                        return -EINVAL;
                end++;
        }
        if (*end)
                return -EINVAL;
        *ret = v;
        *ret_percent = percent;
        return 0;
}

static int fail(char **ret_error, int line, const char *what, const char *detail) {
        if (ret_error)
                *ret_error = xasprintf("line %d: %s%s%s", line, what, detail ? ": " : "",
                                       detail ? detail : "");
        return -EINVAL;
}

static int parse_line(SchedQuota *q, QuotaProject **cur, char *s, int line, char **ret_error) {
        if (*s == '[') {
                char *close = strchr(s, ']');
                if (!close || *trim(close + 1))
                        return fail(ret_error, line,
                                    "a section header must be [default] or "
                                    "[project NAME]",
                                    s);
                *close = '\0';
                char *inner = trim(s + 1);
                if (strcmp(inner, "default") == 0) {
                        if (q->has_defaults)
                                return fail(ret_error, line, "duplicate section", "[default]");
                        q->has_defaults = true;
                        *cur = &q->defaults;
                        return 0;
                }
                if (strncmp(inner, "project", 7) != 0 || (inner[7] != ' ' && inner[7] != '\t'))
                        return fail(ret_error, line,
                                    "unknown section (expected [default] or "
                                    "[project NAME])",
                                    inner);
                char *name = trim(inner + 7);
                if (!name_valid(name))
                        return fail(ret_error, line,
                                    "invalid project name (letters, digits, "
                                    "'-', '_' and '.')",
                                    name);
                for (int i = 0; i < q->n_projects; i++)
                        if (strcmp(q->projects[i].name, name) == 0)
                                return fail(ret_error, line, "duplicate project", name);
                q->projects =
                        xrealloc(q->projects, (size_t) (q->n_projects + 1) * sizeof(QuotaProject));
                *cur = &q->projects[q->n_projects++];
                **cur = (QuotaProject){.name = xstrdup(name), .share = 1};
                return 0;
        }
        char *eq = strchr(s, '=');
        if (!eq)
                return fail(ret_error, line, "expected 'key = value' or a [section]", s);
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        if (!*cur)
                return fail(ret_error, line, "setting outside a section", key);
        if (!name_valid(key))
                return fail(ret_error, line, "invalid key", key);
        if (strcmp(key, "cpu") == 0)
                key = SCHED_KIND_CPUS;
        bool is_share = strcmp(key, "share") == 0;
        double v;
        bool percent;
        if (parse_value(value, !is_share, &v, &percent) < 0)
                return fail(ret_error, line,
                            is_share ? "share must be a non-negative number"
                                     : "expected a non-negative number or a percentage "
                                       "(0% to 100%)",
                            value);
        QuotaProject *p = *cur;
        if (is_share) {
                p->share = v;
                return 0;
        }
        for (int i = 0; i < p->n_entries; i++)
                if (strcmp(p->entries[i].kind, key) == 0)
                        return fail(ret_error, line, "duplicate key", key);
        p->entries = xrealloc(p->entries, (size_t) (p->n_entries + 1) * sizeof(QuotaEntry));
        p->entries[p->n_entries++] =
                (QuotaEntry){.kind = xstrdup(key), .value = v, .percent = percent};
        return 0;
}

int sched_quota_parse(const char *text, SchedQuota **ret, char **ret_error) {
        SchedQuota *q = xcalloc(1, sizeof(SchedQuota));
        q->defaults.share = 1;
        QuotaProject *cur = NULL;
        _cleanup_free_ char *copy = xstrdup(text ? text : "");
        char *save = NULL;
        int line = 0;
        if (ret_error)
                *ret_error = NULL;
        /* strtok_r would merge empty lines and lose the count: split by hand. */
        for (char *s = copy; s; s = save) {
                save = strchr(s, '\n');
                if (save)
                        *save++ = '\0';
                line++;
                char *hash = strpbrk(s, "#;");
                if (hash)
                        *hash = '\0';
                s = trim(s);
                if (!*s)
                        continue;
                int r = parse_line(q, &cur, s, line, ret_error);
                if (r < 0) {
                        sched_quota_free(q);
                        return r;
                }
        }
        *ret = q;
        return 0;
}

int sched_quota_n_projects(const SchedQuota *q) {
        return q ? q->n_projects : 0;
}

const char *sched_quota_project(const SchedQuota *q, int i) {
        return q && i >= 0 && i < q->n_projects ? q->projects[i].name : NULL;
}

static const QuotaEntry *entry_find(const QuotaProject *p, const char *kind) {
        for (int i = 0; p && i < p->n_entries; i++)
                if (strcmp(p->entries[i].kind, kind) == 0)
                        return &p->entries[i];
        return NULL;
}

void sched_quota_normalise(const SchedQuota *q, char *const *kinds, const int64_t *capacity,
                           int n_kinds, const char *const *projects, int n_projects,
                           bool *ret_configured, double *ret_quota) {
        /* Which entry speaks for each project: its own section, else [default]. */
        const QuotaProject **of = xcalloc((size_t) n_projects + 1, sizeof(QuotaProject *));
        StrMap *named = strmap_new();
        for (int i = 0; q && i < q->n_projects; i++)
                strmap_put(named, q->projects[i].name, &q->projects[i]);
        for (int p = 0; p < n_projects; p++) {
                const QuotaProject *qp = strmap_get(named, projects[p]);
                ret_configured[p] = qp != NULL;
                of[p] = qp ? qp : q ? &q->defaults : NULL;
        }
        strmap_free(named);

        for (int k = 0; k < n_kinds; k++) {
                double cap = (double) capacity[k], fixed = 0, weights = 0;
                for (int p = 0; p < n_projects; p++) {
                        const QuotaEntry *e = entry_find(of[p], kinds[k]);
                        if (e && e->percent)
                                fixed += e->value / 100.0 * cap;
                        else
                                weights += e ? e->value : of[p] ? of[p]->share : 1.0;
                }
                /* Percentages beyond the whole fleet are scaled down together. */
                double scale = fixed > cap && fixed > 0 ? cap / fixed : 1.0;
                double rest = cap - fixed * scale;
                if (rest < 0)
                        rest = 0;
                for (int p = 0; p < n_projects; p++) {
                        const QuotaEntry *e = entry_find(of[p], kinds[k]);
                        double *out = &ret_quota[(size_t) p * (size_t) n_kinds + (size_t) k];
                        if (e && e->percent)
                                *out = e->value / 100.0 * cap * scale;
                        else {
                                double w = e ? e->value : of[p] ? of[p]->share : 1.0;
                                *out = weights > 0 ? rest * w / weights : 0;
                        }
                }
        }
        free(of);
}
