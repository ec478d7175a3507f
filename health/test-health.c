/* SPDX-License-Identifier: MIT */
/* Tests of the restart, backoff, lease and quarantine policy. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "health.h"
#include "util.h"

/* Each detector finds what it knows and nothing else; the registry's order decides. */
static void test_detectors(void) {
        HealthFinding f;
        HealthSeen crash = {.kind = HEALTH_SEEN_RANK,
                            .node = "n1",
                            .rank = 2,
                            .exited = true,
                            .exit_code = 3,
                            .hung = true};
        CHECK(health_detect(&crash, &f));
        CHECK_INT(f.reason, END_RANK_EXIT); /* the exit outranks the hang */
        CHECK_INT(f.cls, FAILURE_JOB);
        CHECK_INT(f.scope, HEALTH_SCOPE_ATTEMPT);
        CHECK_INT(f.exit_code, 3);
        CHECK_STR(f.detail, "rank 2 on n1 exited with code 3");
        HealthSeen sig = {.kind = HEALTH_SEEN_RANK,
                          .node = "n1",
                          .exited = true,
                          .exit_code = -1,
                          .signal = 9};
        CHECK(health_detect(&sig, &f));
        CHECK_INT(f.signal, 9);
        CHECK_STR(f.detail, "rank 0 on n1 killed by signal 9");
        HealthSeen clean = {.kind = HEALTH_SEEN_RANK, .node = "n1", .exited = true};
        CHECK(!health_detect(&clean, &f)); /* success is no failure */
        HealthSeen nostart = {.kind = HEALTH_SEEN_RANK,
                              .node = "n1",
                              .exited = true,
                              .exit_code = 127,
                              .start_failed = true};
        CHECK(health_detect(&nostart, &f));
        CHECK_INT(f.reason, END_START_FAILED);
        CHECK_INT(f.cls, FAILURE_START);
        HealthSeen hung = {.kind = HEALTH_SEEN_RANK,
                           .node = "n1",
                           .rank = 1,
                           .hung = true,
                           .exit_code = -1,
                           .step = 40,
                           .hang_timeout_s = 30};
        CHECK(health_detect(&hung, &f));
        CHECK_INT(f.reason, END_HANG);
        CHECK_STR(f.detail, "rank 1 made no progress for 30s (last step 40)");
        HealthSeen running = {.kind = HEALTH_SEEN_RANK, .node = "n1", .exit_code = -1};
        CHECK(!health_detect(&running, &f));
        HealthSeen missing = {.kind = HEALTH_SEEN_RANK_MISSING, .node = "n1", .rank = 4};
        CHECK(health_detect(&missing, &f));
        CHECK_INT(f.cls, FAILURE_JOB);
        CHECK_STR(f.detail, "rank 4 vanished from n1 without an exit status");

        HealthSeen sick = {.kind = HEALTH_SEEN_NODE,
                           .node = "n1",
                           .healthy = false,
                           .health_reason = "xid 79"};
        CHECK(health_detect(&sick, &f));
        CHECK_INT(f.cls, FAILURE_NODE);
        CHECK_INT(f.scope, HEALTH_SCOPE_NODE);
        CHECK_INT(f.node_state, NODE_UNHEALTHY);
        CHECK(!f.ranks_gone); /* they run on until their agent kills them */
        CHECK_STR(f.detail, "xid 79");
        HealthSeen well = {.kind = HEALTH_SEEN_NODE, .node = "n1", .healthy = true};
        CHECK(!health_detect(&well, &f));

        HealthSeen quiet = {.kind = HEALTH_SEEN_SILENCE,
                            .node = "n1",
                            .silent_ms = 12000,
                            .lease_ms = 10000,
                            .grace_ms = 2000};
        CHECK(!health_detect(&quiet, &f)); /* lease + grace not yet over */
        quiet.silent_ms = 12001;
        CHECK(health_detect(&quiet, &f));
        CHECK_INT(f.reason, END_NODE_LOST);
        CHECK_INT(f.node_state, NODE_DOWN);
        CHECK(f.ranks_gone); /* fenced by their own supervisors by now */
        HealthSeen reboot = {.kind = HEALTH_SEEN_REGISTER, .node = "n1", .boot_changed = true};
        CHECK(health_detect(&reboot, &f));
        CHECK(f.ranks_gone);
        CHECK_INT(f.node_state, _NODE_STATE_INVALID);
        reboot.boot_changed = false;
        CHECK(!health_detect(&reboot, &f));
        reboot.agent_replaced = true; /* another agent took the node */
        CHECK(health_detect(&reboot, &f));
        CHECK(f.ranks_gone);
        CHECK_INT(f.node_state, NODE_DOWN); /* as the lease detector would have */
        CHECK_INT(f.reason, END_NODE_LOST);

        /* Every registered detector has a name, and names are unique. */
        int n = 0;
        for (int i = 0; health_detectors[i]; i++, n++) {
                CHECK(health_detectors[i]->name && health_detectors[i]->detect);
                for (int k = 0; k < i; k++)
                        CHECK(strcmp(health_detectors[i]->name, health_detectors[k]->name) != 0);
        }
        CHECK_INT(n, 9);
}

static json_t *rules_json(const char *text) {
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        CHECK(j != NULL);
        return j;
}

/* Failure rules: the operator's first, then the job's; only operators blame by rule. */
static void test_failure_rules(void) {
        FailRules ops = {0}, own = {0};
        JsonError err;
        json_t *j = rules_json("[{\"pattern\": \"NVRM: Xid \\\\(PCI:[^)]*\\\\): (48|79),\", "
                               "\"action\": \"node_fault\", \"why\": \"GPU gone\"}]");
        CHECK(failrules_parse(j, "rules", FAILRULES_MAX_FILE, &ops, &err) == 0);
        json_decref(j);
        j = rules_json("[{\"pattern\": \"^OOM\", \"action\": \"fatal\"},"
                       " {\"pattern\": \"flaky\", \"action\": \"retry\"},"
                       " {\"pattern\": \"Xid\", \"action\": \"node_fault\"}]");
        CHECK(failrules_parse(j, "failure_rules", FAILRULES_MAX_JOB, &own, &err) == 0);
        json_decref(j);
        HealthSeen s = {.kind = HEALTH_SEEN_RANK,
                        .node = "n1",
                        .exited = true,
                        .exit_code = 1,
                        .operator_rules = &ops,
                        .job_rules = &own,
                        .log_tail = "step 9\nNVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off "
                                    "the bus\nbye\n"};
        HealthFinding f;
        CHECK(health_detect(&s, &f));
        CHECK_INT(f.reason, END_NODE_FAULT);
        CHECK_INT(f.cls, FAILURE_NODE);
        /* Even the operator's rule only moves the job: the log is the job's own text. */
        CHECK(f.claimed_by_job);
        CHECK(strstr(f.detail, "the operator's rule 1 (node_fault, GPU gone): NVRM: Xid (PCI:"
                               "0000:3b:00): 79, GPU has fallen off the bus") != NULL);
        /* The job's own rule: the same. */
        s.log_tail = "Xid 13 in my own kernel\n";
        CHECK(health_detect(&s, &f));
        CHECK(f.cls == FAILURE_NODE && f.claimed_by_job);
        s.log_tail = "OOM: out of host memory\n";
        CHECK(health_detect(&s, &f));
        CHECK(f.reason == END_RANK_EXIT && f.rule == FAILRULE_FATAL);
        s.log_tail = "not OOM at the start of a line\n";
        CHECK(health_detect(&s, &f));
        CHECK_INT(f.rule, _FAILRULE_ACTION_INVALID); /* the plain exit */
        CHECK_STR(f.detail, "rank 0 on n1 exited with code 1");
        /* A success matches nothing, whatever its log says. */
        s.exit_code = 0;
        s.log_tail = "flaky";
        CHECK(!health_detect(&s, &f));

        /* Bad rules are refused with the field named. */
        const char *bad[] = {
                "[{\"pattern\": \"(a\", \"action\": \"fatal\"}]",
                "[{\"pattern\": \"(a)\\\\1\", \"action\": \"fatal\"}]",
                "[{\"pattern\": \"a\", \"action\": \"blame\"}]",
                /* Patterns that would stall the controller's loop (5 s on 4 KiB). */
                "[{\"pattern\": \"(a{1,100}){1,100}b\", \"action\": \"fatal\"}]",
                "[{\"pattern\": \"(a{1,8}){1,8}b\", \"action\": \"fatal\"}]",
                "[{\"pattern\": \"a{17}\", \"action\": \"fatal\"}]",
                "[{\"pattern\": \"a{1,}b{2}c{3}d{4}e{5}\", \"action\": \"fatal\"}]",
                "[{\"pattern\": \"a\", \"action\": \"fatal\", \"extra\": 1}]",
                "{\"pattern\": \"a\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                FailRules r = {0};
                j = rules_json(bad[i]);
                CHECK(failrules_parse(j, "failure_rules", FAILRULES_MAX_JOB, &r, &err) == -EINVAL);
                CHECK(strncmp(err.field, "failure_rules", 13) == 0);
                CHECK_INT(r.n, 0);
                json_decref(j);
        }
        /* Braces in a bracket expression are characters; small counts are fine. */
        FailRules fine = {0};
        j = rules_json("[{\"pattern\": \"[{][]{]x{2,16}y{3}\", \"action\": \"fatal\"}]");
        CHECK(failrules_parse(j, "failure_rules", FAILRULES_MAX_JOB, &fine, &err) == 0);
        json_decref(j);
        FailRuleMatch fm;
        CHECK(failrules_match(&fine, "{]xxyyy", &fm));
        failrules_clear(&fine);
        failrules_clear(&ops);
        failrules_clear(&own);
}

/* A placed rank that never runs blames its node after the start timeout. */
static void test_start_timeout(void) {
        HealthFinding f;
        HealthSeen w = {.kind = HEALTH_SEEN_RANK_WAITING,
                        .node = "n2",
                        .rank = 3,
                        .waited_ms = 9999,
                        .start_timeout_ms = 10000};
        CHECK(!health_detect(&w, &f));
        w.waited_ms = 10000;
        CHECK(health_detect(&w, &f));
        CHECK(f.reason == END_START_TIMEOUT && f.cls == FAILURE_NODE);
        CHECK_STR(f.detail, "rank 3 on n2 was not running 10.0s after placement");
        w.start_timeout_ms = 0; /* disabled */
        CHECK(!health_detect(&w, &f));
        /* An agent that cannot write its state dir: the node's fault, not the job's. */
        HealthSeen full = {.kind = HEALTH_SEEN_RANK,
                           .node = "n2",
                           .exited = true,
                           .exit_code = 126,
                           .start_failed = true,
                           .node_fault = true};
        CHECK(health_detect(&full, &f));
        CHECK(f.reason == END_NODE_FAULT && f.cls == FAILURE_NODE);
}

/* From findings to verdicts, with a node's history. */
static void test_judge(void) {
        RestartPolicy p = {.max_restarts = 5,
                           .backoff_initial_s = 0,
                           .backoff_max_s = 60,
                           .max_failures_without_progress = 3};
        int64_t blames[16];
        HealthSuspect sus[32];
        int nb = 0, ns = 0;
        HealthHistory h = {.blame_times = blames,
                           .n_blame = &nb,
                           .blame_cap = 16,
                           .suspects = sus,
                           .n_suspects = &ns,
                           .suspect_cap = 32};
        HealthFinding crash = {.reason = END_RANK_EXIT, .cls = FAILURE_JOB, .exit_code = 1};
        HealthCase c = {.finding = &crash,
                        .policy = &p,
                        .window_ms = 600000,
                        .quarantine_after = 3,
                        .suspect = {.job = 1, .owner = 7, .at_ms = 1000, .fine_elsewhere = true}};
        /* A job's own crash: no blame, no move, a quick failure counted. */
        HealthJudgement j = health_judge(&c, &h);
        CHECK(!j.blame && !j.avoid && !j.quarantine);
        CHECK_INT(j.quick_failures, 1);
        CHECK_INT(j.verdict.action, HEALTH_RESTART);
        CHECK_INT(j.verdict.backoff_ms, 0);
        /* In a row without progress: backoff, then the limit fails the job. */
        c.quick_failures = 1;
        j = health_judge(&c, &h);
        CHECK_INT(j.verdict.backoff_ms, 1000);
        c.quick_failures = 2;
        CHECK_INT(health_judge(&c, &h).verdict.action, HEALTH_FAIL);
        c.progressed = true;
        j = health_judge(&c, &h);
        CHECK_INT(j.quick_failures, 0);
        CHECK_INT(j.verdict.action, HEALTH_RESTART);
        CHECK_INT(nb, 0); /* still no blame: one owner */

        /* Another owner's job fails there too, and a third job: now it is evidence. */
        c.suspect = (HealthSuspect){.job = 2, .owner = 8, .at_ms = 2000, .fine_elsewhere = true};
        CHECK(!health_judge(&c, &h).blame);
        /* Jobs that fail everywhere are no witnesses, however many owners they have. */
        for (int i = 0; i < 10; i++) {
                c.suspect = (HealthSuspect){.job = 10 + i, .owner = 100 + i, .at_ms = 2100};
                CHECK(!health_judge(&c, &h).blame);
        }
        c.suspect = (HealthSuspect){.job = 3, .owner = 7, .at_ms = 2500, .fine_elsewhere = true};
        j = health_judge(&c, &h);
        CHECK(j.blame && j.by_suspicion);
        CHECK(!j.avoid); /* the job's own class: it may stay */
        CHECK_INT(nb, 1);

        /* A node fault: blamed at once, the job moves, its quick failures stay. */
        HealthFinding sick = {.reason = END_UNHEALTHY, .cls = FAILURE_NODE, .exit_code = -1};
        HealthCase n = {.finding = &sick,
                        .policy = &p,
                        .quick_failures = 2,
                        .window_ms = 600000,
                        .quarantine_after = 3,
                        .suspect = {.job = 3, .owner = 9, .at_ms = 3000}};
        j = health_judge(&n, &h);
        CHECK(j.blame && !j.by_suspicion && j.avoid);
        CHECK(!j.quarantine);
        CHECK_INT(j.quick_failures, 2);
        CHECK_INT(j.verdict.action, HEALTH_RESTART);
        j = health_judge(&n, &h);
        CHECK(j.quarantine); /* the third blame within the window */
        /* Seen nowhere in particular: nobody to blame or avoid. */
        j = health_judge(&n, NULL);
        CHECK(!j.blame && !j.avoid);
        /* A drain moves the job without blame or budget. */
        HealthFinding drain = {.reason = END_DRAINED, .cls = FAILURE_PREEMPTED, .exit_code = -1};
        HealthCase d = {
                .finding = &drain, .policy = &p, .restarts_used = 5, .suspect = {.at_ms = 4000}};
        int before = nb;
        j = health_judge(&d, &h);
        CHECK(!j.blame && j.avoid);
        CHECK_INT(j.verdict.action, HEALTH_RESTART_FREE);
        CHECK_INT(nb, before);

        /* The job's own node_fault rule: it moves, the node is not blamed, and it
         * counts as the job's own failure (backoff, the limit without progress). */
        HealthFinding claim = {.reason = END_NODE_FAULT,
                               .cls = FAILURE_NODE,
                               .claimed_by_job = true,
                               .exit_code = 1,
                               .rule = FAILRULE_NODE_FAULT};
        HealthCase cl = {.finding = &claim,
                         .policy = &p,
                         .quick_failures = 2,
                         .window_ms = 600000,
                         .quarantine_after = 3,
                         .suspect = {.job = 50, .owner = 50, .at_ms = 5000}};
        before = nb;
        j = health_judge(&cl, &h);
        CHECK(!j.blame && j.avoid);
        CHECK_INT(nb, before);
        CHECK_INT(j.quick_failures, 3);
        CHECK_INT(j.verdict.action, HEALTH_FAIL);
        /* Fatal and retry rules. */
        HealthFinding fatal = {.reason = END_RANK_EXIT,
                               .cls = FAILURE_JOB,
                               .exit_code = 1,
                               .rule = FAILRULE_FATAL};
        HealthCase fc = {.finding = &fatal, .policy = &p};
        CHECK_INT(health_judge(&fc, NULL).verdict.action, HEALTH_FAIL);
        HealthFinding retry = {.reason = END_RANK_EXIT,
                               .cls = FAILURE_JOB,
                               .exit_code = 1,
                               .rule = FAILRULE_RETRY};
        HealthCase rc = {.finding = &retry, .policy = &p, .restarts_used = 5, .quick_failures = 1};
        j = health_judge(&rc, NULL);
        CHECK_INT(j.verdict.action, HEALTH_RESTART_FREE);
        CHECK_INT(j.verdict.backoff_ms, 1000); /* through the backoff like any failure */
        rc.quick_failures = 2; /* and bounded by the limit without progress */
        CHECK_INT(health_judge(&rc, NULL).verdict.action, HEALTH_FAIL);
}

int main(void) {
        RestartPolicy p = {.max_restarts = 2,
                           .backoff_initial_s = 0,
                           .backoff_max_s = 5,
                           .retry_exit_codes = (int[]){75},
                           .n_retry_exit_codes = 1,
                           .fatal_exit_codes = (int[]){2},
                           .n_fatal_exit_codes = 1};
        HealthFailure crash = {.reason = END_RANK_EXIT, .exit_code = 1};
        HealthVerdict v = health_decide(&p, 0, &crash);
        CHECK_INT(v.action, HEALTH_RESTART);
        CHECK_INT(v.backoff_ms, 0); /* the first restart is immediate by default */
        crash.consecutive = 1;
        v = health_decide(&p, 1, &crash);
        CHECK_INT(v.action, HEALTH_RESTART);
        CHECK_INT(v.backoff_ms, 1000);
        crash.consecutive = 0; /* progress made: at once again */
        CHECK_INT(health_decide(&p, 1, &crash).backoff_ms, 0);
        v = health_decide(&p, 2, &crash);
        CHECK_INT(v.action, HEALTH_FAIL);

        HealthFailure fatal = {.reason = END_RANK_EXIT, .exit_code = 2};
        CHECK_INT(health_decide(&p, 0, &fatal).action, HEALTH_FAIL);
        HealthFailure retry = {.reason = END_RANK_EXIT, .exit_code = 75};
        CHECK_INT(health_decide(&p, 2, &retry).action, HEALTH_RESTART_FREE);
        HealthFailure sig = {.reason = END_RANK_EXIT, .exit_code = -1, .signal = 9};
        CHECK_INT(health_decide(&p, 0, &sig).action, HEALTH_RESTART);
        HealthFailure pre = {.reason = END_PREEMPTED, .exit_code = -1};
        CHECK_INT(health_decide(&p, 5, &pre).action, HEALTH_RESTART_FREE);

        /* Exponential, capped. */
        CHECK_INT(health_backoff_ms(&p, 2), 2000);
        CHECK_INT(health_backoff_ms(&p, 3), 4000);
        CHECK_INT(health_backoff_ms(&p, 4), 5000);
        CHECK_INT(health_backoff_ms(&p, 40), 5000);
        p.backoff_initial_s = 3;
        CHECK_INT(health_backoff_ms(&p, 0), 3000);

        CHECK(!health_node_lost(1000, 7000, 5000, 1000));
        CHECK(health_node_lost(1000, 7001, 5000, 1000));

        int64_t times[4];
        int n = 0;
        CHECK(!health_blame_record(times, &n, 4, 0, 100, 3));
        CHECK(!health_blame_record(times, &n, 4, 200, 100,
                                   3)); /* the first fell out of the window */
        CHECK(!health_blame_record(times, &n, 4, 250, 100, 3));
        CHECK(health_blame_record(times, &n, 4, 260, 100, 3));
        CHECK(!health_blame_record(times, &n, 4, 270, 100, 0)); /* disabled */
        CHECK_INT(n, 4);

        /* Classes: only lease expiry and failed health checks are the node's. */
        CHECK_INT(health_classify(END_RANK_EXIT), FAILURE_JOB);
        CHECK_INT(health_classify(END_HANG), FAILURE_JOB);
        CHECK_INT(health_classify(END_START_FAILED), FAILURE_START);
        CHECK_INT(health_classify(END_NODE_LOST), FAILURE_NODE);
        CHECK_INT(health_classify(END_UNHEALTHY), FAILURE_NODE);
        CHECK_INT(health_classify(END_DRAINED), FAILURE_PREEMPTED);
        CHECK(strcmp(failure_class_to_string(FAILURE_START), "start") == 0);

        /* A start failure fails at once, whatever the budget. */
        HealthFailure start = {.reason = END_START_FAILED, .exit_code = 127};
        CHECK_INT(health_decide(&p, 0, &start).action, HEALTH_FAIL);

        /* The Nth job failure in a row without progress fails the job, retry codes too;
         * node faults do not count. */
        RestartPolicy q = p;
        q.max_restarts = 100;
        q.backoff_initial_s = 0;
        q.max_failures_without_progress = 3;
        HealthFailure loop = {
                .reason = END_RANK_EXIT, .exit_code = 75, .consecutive = 1, .without_progress = 2};
        v = health_decide(&q, 0, &loop);
        CHECK_INT(v.action, HEALTH_RESTART_FREE);
        CHECK_INT(v.backoff_ms, 1000); /* retried codes back off like any failure */
        loop.consecutive = 2;
        loop.without_progress = 3;
        v = health_decide(&q, 0, &loop);
        CHECK_INT(v.action, HEALTH_FAIL);
        CHECK(strstr(v.why, "3 times in a row without progress"));
        HealthFailure lost = {.reason = END_NODE_LOST, .exit_code = -1, .without_progress = 9};
        CHECK_INT(health_decide(&q, 0, &lost).action, HEALTH_RESTART);

        /* backoff_max_s 0 still waits a second between failures without progress. */
        RestartPolicy spin = {.max_restarts = 10, .backoff_max_s = 0};
        CHECK_INT(health_backoff_ms(&spin, 0), 0);
        CHECK_INT(health_backoff_ms(&spin, 1), HEALTH_BACKOFF_FLOOR_MS);
        CHECK_INT(health_backoff_ms(&spin, 9), HEALTH_BACKOFF_FLOOR_MS);

        /* Suspicion: one owner's jobs never add up to evidence, however many. */
        HealthSuspect sus[8];
        int ns = 0;
        for (int i = 0; i < 20; i++)
                CHECK(!health_suspect_record(
                        sus, &ns, 8,
                        (HealthSuspect){.job = i, .owner = 7, .at_ms = i, .fine_elsewhere = true},
                        1000, 3));
        CHECK_INT(ns, 8);
        /* Three different jobs of two owners within the window do. */
        ns = 0;
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){1, 7, 0, true}, 1000, 3));
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){1, 7, 10, true}, 1000, 3));
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){2, 8, 20, true}, 1000, 3));
        CHECK(health_suspect_record(sus, &ns, 8, (HealthSuspect){3, 7, 30, true}, 1000, 3));
        /* ... but not once the first has left the window. */
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){2, 8, 1015, true}, 1000, 3));
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){4, 8, 30, true}, 1000, 0));
        test_detectors();
        test_failure_rules();
        test_start_timeout();
        test_judge();
        printf("health: ok\n");
        return 0;
}
