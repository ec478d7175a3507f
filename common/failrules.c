/* SPDX-License-Identifier: MIT */
/* Failure rules: parsing, the operator's file and matching; see failrules.h. */
#include "failrules.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const char *const action_names[_FAILRULE_ACTION_MAX] = {
        [FAILRULE_NODE_FAULT] = "node_fault",
        [FAILRULE_FATAL] = "fatal",
        [FAILRULE_RETRY] = "retry",
};

const char *failrule_action_to_string(FailRuleAction a) {
        return a >= 0 && a < _FAILRULE_ACTION_MAX ? action_names[a] : NULL;
}

FailRuleAction failrule_action_from_string(const char *s) {
        for (int i = 0; s && i < _FAILRULE_ACTION_MAX; i++)
                if (strcmp(action_names[i], s) == 0)
                        return (FailRuleAction) i;
        return _FAILRULE_ACTION_INVALID;
}

void failrules_clear(FailRules *r) {
        for (int i = 0; i < r->n; i++) {
                free(r->rules[i].pattern);
                free(r->rules[i].why);
                regfree(&r->rules[i].re);
        }
        free(r->rules);
        *r = (FailRules){0};
}

/*
 * Why a pattern could take long to match (see failrules.h), or NULL: a back-reference;
 * a {m,n} count on a group, over FAILRULE_MAX_COUNT, or more than FAILRULE_MAX_COUNTS
 * of them. Bracket expressions are skipped whole, escapes one character at a time.
 */
static const char *pattern_too_costly(const char *p) {
        int counts = 0;
        char prev = '\0';
        for (; *p; prev = *p, p++) {
                if (*p == '\\') {
                        if (p[1] >= '1' && p[1] <= '9')
                                return "back-references (\\1 to \\9) are not allowed";
                        if (p[1])
                                p++;
                        continue;
                }
                if (*p == '[') {
                        /* "[]...]" and "[^]...]" hold a literal ']'. */
                        const char *q = p + 1 + (p[1] == '^');
                        q += *q == ']';
                        while (*q && *q != ']')
                                q++;
                        if (!*q)
                                return NULL; /* regcomp reports it */
                        p = q;
                        continue;
                }
                if (*p != '{')
                        continue;
                if (prev == ')')
                        return "a {m,n} count may not repeat a group";
                if (++counts > FAILRULE_MAX_COUNTS)
                        return "at most 4 {m,n} counts";
                char *end;
                for (const char *q = p + 1; *q && *q != '}'; q = end) {
                        long v = strtol(q, &end, 10);
                        if (end == q) {
                                end = (char *) q + 1; /* the ',' */
                                continue;
                        }
                        if (v > FAILRULE_MAX_COUNT)
                                return "{m,n} counts go up to 16";
                }
        }
        return NULL;
}

static int parse_rule(json_t *o, const char *field, FailRule *rule, JsonError *err) {
        static const char *const keys[] = {"pattern", "action", "why", NULL};
        char prefix[160];
        snprintf(prefix, sizeof(prefix), "%s[].", field);
        if (!json_is_object(o))
                return json_error_set(err, field, "entries must be objects");
        int k = json_check_keys(o, prefix, keys, err);
        if (k < 0)
                return k;
        const char *pattern = NULL, *action = NULL, *why = NULL;
        char f[192];
        snprintf(f, sizeof(f), "%spattern", prefix);
        if ((k = json_get_string(o, "pattern", f, true, FAILRULE_MAX_PATTERN, &pattern, err)) < 0)
                return k;
        const char *costly = pattern_too_costly(pattern);
        if (costly)
                return json_error_set(err, f, "%s: it could take long to match", costly);
        int rc = regcomp(&rule->re, pattern, REG_EXTENDED | REG_NEWLINE);
        if (rc != 0) {
                char msg[128];
                regerror(rc, &rule->re, msg, sizeof(msg));
                return json_error_set(err, f, "not a valid extended regular expression: %s", msg);
        }
        rule->pattern = xstrdup(pattern);
        snprintf(f, sizeof(f), "%saction", prefix);
        if ((k = json_get_string(o, "action", f, true, 32, &action, err)) < 0)
                return k;
        rule->action = failrule_action_from_string(action);
        if (rule->action == _FAILRULE_ACTION_INVALID)
                return json_error_set(err, f, "must be node_fault, fatal or retry");
        snprintf(f, sizeof(f), "%swhy", prefix);
        if ((k = json_get_string(o, "why", f, false, FAILRULE_MAX_WHY, &why, err)) < 0)
                return k;
        rule->why = why ? xstrdup(why) : NULL;
        return 0;
}

int failrules_parse(json_t *list, const char *field, int max, FailRules *ret, JsonError *err) {
        failrules_clear(ret);
        if (!json_is_array(list))
                return json_error_set(err, field, "must be a list of rules");
        if (json_array_size(list) > (size_t) max)
                return json_error_set(err, field, "at most %d rules", max);
        FailRules r = {.rules = xcalloc(json_array_size(list) + 1, sizeof(FailRule))};
        for (size_t i = 0; i < json_array_size(list); i++) {
                /* A rule counts (for clearing) once its regex is compiled. */
                FailRule rule = {0};
                int k = parse_rule(json_array_get(list, i), field, &rule, err);
                if (k < 0) {
                        if (rule.pattern)
                                regfree(&rule.re);
                        free(rule.pattern);
                        free(rule.why);
                        failrules_clear(&r);
                        return k;
                }
                r.rules[r.n++] = rule;
        }
        *ret = r;
        return 0;
}

int failrules_load(const char *path, FailRules *ret, JsonError *err) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > FAILRULES_MAX_FILE_BYTES) {
                close(fd);
                return json_error_set(err, "", "not a regular file of at most %d bytes",
                                      FAILRULES_MAX_FILE_BYTES);
        }
        json_error_t jerr;
        json_t *json = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
        close(fd);
        if (!json)
                return json_error_set(err, "", "line %d: %s", jerr.line, jerr.text);
        FailRules rules = {0};
        int k = failrules_parse(json, "rules", FAILRULES_MAX_FILE, &rules, err);
        json_decref(json);
        if (k < 0)
                return k;
        failrules_clear(ret);
        *ret = rules;
        return 0;
}

json_t *failrules_to_json(const FailRules *r) {
        json_t *list = json_array();
        for (int i = 0; i < r->n; i++) {
                json_t *o = json_pack("{s:s,s:s}", "pattern", r->rules[i].pattern, "action",
                                      failrule_action_to_string(r->rules[i].action));
                if (r->rules[i].why)
                        json_object_set_new(o, "why", json_string(r->rules[i].why));
                json_array_append_new(list, o);
        }
        return list;
}

/*
 * text with a line break before every character that would make a line longer than
 * FAILRULES_LINE_PIECE bytes (malloc'd), or NULL when no line is that long. glibc tries
 * a pattern from every start in a line and may scan on to the line's end, so a rule can
 * cost the square of the longest line: pieces bound that.
 */
static char *failrules_pieces(const char *text) {
        size_t len = strlen(text), run = 0, longest = 0;
        for (size_t i = 0; i < len; i++) {
                run = text[i] == '\n' ? 0 : run + 1;
                longest = run > longest ? run : longest;
        }
        if (longest <= FAILRULES_LINE_PIECE)
                return NULL;
        char *out = xmalloc(len + len / FAILRULES_LINE_PIECE + 2);
        size_t o = 0;
        run = 0;
        for (size_t i = 0; i < len; i++) {
                bool starts_char = ((unsigned char) text[i] & 0xC0) != 0x80;
                if (text[i] == '\n') {
                        run = 0;
                } else if (run >= FAILRULES_LINE_PIECE && starts_char) {
                        out[o++] = '\n';
                        run = 0;
                }
                run += text[i] != '\n';
                out[o++] = text[i];
        }
        out[o] = '\0';
        return out;
}

bool failrules_match(const FailRules *r, const char *text, FailRuleMatch *ret) {
        _cleanup_free_ char *pieces = r && r->n > 0 && text ? failrules_pieces(text) : NULL;
        if (pieces)
                text = pieces;
        for (int i = 0; r && text && i < r->n; i++) {
                regmatch_t m;
                if (regexec(&r->rules[i].re, text, 1, &m, 0) != 0)
                        continue;
                /* The whole line the match starts in, for the attempt's detail. */
                const char *start = text + m.rm_so;
                while (start > text && start[-1] != '\n')
                        start--;
                size_t len = util_utf8_cut(start, strcspn(start, "\n"), sizeof(ret->line) - 1);
                *ret = (FailRuleMatch){.rule = &r->rules[i], .index = i};
                snprintf(ret->line, sizeof(ret->line), "%.*s", (int) len, start);
                return true;
        }
        return false;
}
