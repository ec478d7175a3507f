/* SPDX-License-Identifier: MIT */
/*
 * Failure rules (DESIGN.md §4a): {"pattern": ERE, "action": "node_fault" | "fatal" |
 * "retry", "why": text} matched against the tail of a failed rank's log. A job carries
 * its own in its spec (`failure_rules`); the operator keeps a file of the same rules
 * (`axctld --failure-rules FILE`, docs/FAILURE-RULES.md). Patterns are POSIX extended
 * regular expressions matched line by line (REG_NEWLINE) over at most
 * FAILRULES_LOG_TAIL bytes, on the controller's loop: so a pattern may not take long to
 * match, whatever the text. glibc expands a {m,n} count into copies of what it repeats,
 * which nesting multiplies (`(a{1,100}){1,100}b` took 5 s on 4 KiB), and back-references
 * make matching exponential: both are refused, counts are bounded, and a job has few
 * rules. What is left grows with the square of a line's length (glibc tries every start
 * and may scan to the line's end: 21 ms for `.*b` on one 4 KiB line), so lines are
 * matched in pieces of at most FAILRULES_LINE_PIECE bytes (measured worst case:
 * docs/PERFORMANCE.md).
 */
#pragma once

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "jsonutil.h"

#define FAILRULES_MAX_JOB 8 /* rules in one job spec */
#define FAILRULES_MAX_FILE 1024 /* rules in the operator's file */
#define FAILRULE_MAX_PATTERN 512
#define FAILRULE_MAX_COUNT 16 /* the largest m or n of a {m,n} count */
#define FAILRULE_MAX_COUNTS 4 /* {m,n} counts in one pattern */
#define FAILRULE_MAX_WHY 200
#define FAILRULES_LOG_TAIL 4096 /* bytes of a failed rank's log the agent sends */
#define FAILRULES_LINE_PIECE 256 /* a longer line is matched as pieces of this many bytes */
#define FAILRULES_MAX_FILE_BYTES (1 << 20)

typedef enum FailRuleAction {
        FAILRULE_NODE_FAULT, /* the failure is evidence against the node */
        FAILRULE_FATAL, /* do not restart: the job fails */
        FAILRULE_RETRY, /* restart without spending budget, through the backoff */
        _FAILRULE_ACTION_MAX,
        _FAILRULE_ACTION_INVALID = -1,
} FailRuleAction;

typedef struct FailRule {
        char *pattern;
        char *why; /* NULL when not given */
        FailRuleAction action;
        regex_t re;
} FailRule;

typedef struct FailRules {
        FailRule *rules;
        int n;
} FailRules;

/* What matched: the rule, its index and the log line it matched in (cut short). */
typedef struct FailRuleMatch {
        const FailRule *rule;
        int index;
        char line[160];
} FailRuleMatch;

const char *failrule_action_to_string(FailRuleAction a);
FailRuleAction failrule_action_from_string(const char *s);

/*
 * Parses a JSON list of at most max rules into *ret (cleared first); field names the
 * list in errors ("failure_rules"). 0, or -EINVAL with err naming the bad entry.
 */
int failrules_parse(json_t *list, const char *field, int max, FailRules *ret, JsonError *err);
/* Reads a file holding a JSON list of rules (at most FAILRULES_MAX_FILE). On failure
 * returns -errno or -EINVAL with err set, and leaves *ret untouched. */
int failrules_load(const char *path, FailRules *ret, JsonError *err);
void failrules_clear(FailRules *r);
/* The rules as the spec shows them (new reference). */
json_t *failrules_to_json(const FailRules *r);

/* The first rule of r whose pattern matches text (NUL-terminated) within a line, or a
 * piece of FAILRULES_LINE_PIECE bytes of a longer line; false when none. */
bool failrules_match(const FailRules *r, const char *text, FailRuleMatch *ret);
