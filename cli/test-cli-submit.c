/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of `axctl submit` argument parsing: the spec JSON it builds must hold
 * exactly the given fields under the names of DESIGN.md §3, a spec file must merge
 * under the flags, and bad input must be a usage error with one line on stderr.
 */
#include "cli.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

typedef struct Capture {
        char *text;
        size_t len;
        FILE *f;
} Capture;

static CliContext ctx_new(Capture *err) {
        err->text = NULL;
        err->f = open_memstream(&err->text, &err->len);
        return (CliContext){.url = xstrdup("http://127.0.0.1:1"), .out = stdout, .err = err->f};
}

static void ctx_done(CliContext *ctx, Capture *err) {
        fclose(err->f);
        free(err->text);
        cli_context_done(ctx);
}

/* Parses argv (NULL-terminated) and compares the compact, sorted spec with want. */
static void check_spec(const char *default_user, const char *want, char **argv) {
        Capture err;
        CliContext ctx = ctx_new(&err);
        int argc = 0;
        while (argv[argc])
                argc++;
        CliSubmit s;
        int r = cli_submit_parse(&ctx, argc, argv, default_user, &s);
        fflush(err.f);
        if (r != CLI_EXIT_OK)
                fprintf(stderr, "unexpected failure: %s\n", err.text);
        assert(r == CLI_EXIT_OK);
        _cleanup_free_ char *got = json_dumps(s.spec, JSON_COMPACT | JSON_SORT_KEYS);
        if (strcmp(got, want) != 0)
                fprintf(stderr, "got  %s\nwant %s\n", got, want);
        assert(strcmp(got, want) == 0);
        cli_submit_done(&s);
        ctx_done(&ctx, &err);
}

/* Parses argv and expects a usage error whose message contains needle. */
static void check_usage_error(const char *needle, char **argv) {
        Capture err;
        CliContext ctx = ctx_new(&err);
        int argc = 0;
        while (argv[argc])
                argc++;
        CliSubmit s;
        int r = cli_submit_parse(&ctx, argc, argv, "alice", &s);
        fflush(err.f);
        assert(r == CLI_EXIT_USAGE);
        if (!strstr(err.text, needle))
                fprintf(stderr, "message '%s' lacks '%s'\n", err.text, needle);
        assert(strstr(err.text, needle));
        assert(strncmp(err.text, "axctl: ", 7) == 0);
        /* Exactly one line. */
        assert(strchr(err.text, '\n') == err.text + strlen(err.text) - 1);
        cli_submit_done(&s);
        ctx_done(&ctx, &err);
}

static void test_minimal(void) {
        check_spec(NULL, "{\"command\":[\"true\"]}", (char *[]){"--", "true", NULL});
        check_spec("alice", "{\"command\":[\"true\"],\"user\":\"alice\"}",
                   (char *[]){"--", "true", NULL});
        /* Without "--" the first word that is not a flag starts the command, and flags
         * after it belong to the command. */
        check_spec(NULL, "{\"command\":[\"python3\",\"train.py\",\"--ranks\",\"9\"],\"ranks\":2}",
                   (char *[]){"--ranks", "2", "python3", "train.py", "--ranks", "9", NULL});
}

static void test_all_flags(void) {
        check_spec("nobody",
                   "{\"checkpoint_dir\":\"/ckpt/x\","
                   "\"command\":[\"python3\",\"train.py\",\"--config\",\"7b\"],"
                   "\"env\":{\"A\":\"1\",\"B\":\"x=y\"},"
                   "\"framework\":\"jax\","
                   "\"hang_timeout_s\":1800,"
                   "\"labels\":{\"team\":\"fm\"},"
                   "\"name\":\"llama\","
                   "\"priority\":-3,"
                   "\"project\":\"foundation\","
                   "\"ranks\":16,"
                   "\"ranks_per_node\":1,"
                   "\"resources\":{\"accelerator\":\"nvidia-h100\",\"accelerators_per_rank\":8,"
                   "\"cpus\":32,\"memory_mb\":524288},"
                   "\"restart\":{\"max_restarts\":10},"
                   "\"user\":\"alice\","
                   "\"workdir\":\"/srv/exp\"}",
                   (char *[]){"--name",
                              "llama",
                              "--project",
                              "foundation",
                              "--user",
                              "alice",
                              "--priority",
                              "-3",
                              "--ranks",
                              "16",
                              "--ranks-per-node=1",
                              "--accelerator",
                              "nvidia-h100",
                              "--accelerators-per-rank",
                              "8",
                              "--cpus",
                              "32",
                              "--memory-mb",
                              "524288",
                              "--framework",
                              "jax",
                              "--checkpoint-dir",
                              "/ckpt/x",
                              "--max-restarts",
                              "10",
                              "--hang-timeout",
                              "1800",
                              "--env",
                              "A=1",
                              "--env",
                              "B=x=y",
                              "--label",
                              "team=fm",
                              "--workdir",
                              "/srv/exp",
                              "--idempotency-key",
                              "k1",
                              "--wait",
                              "--",
                              "python3",
                              "train.py",
                              "--config",
                              "7b",
                              NULL});
}

static void test_options_not_in_spec(void) {
        Capture err;
        CliContext ctx = ctx_new(&err);
        char *argv[] = {"--idempotency-key", "abc", "--wait", "--timeout", "2.5", "--json", "--url",
                        "http://h:1/",       "--",  "sleep",  "1"};
        CliSubmit s;
        assert(cli_submit_parse(&ctx, ELEMENTSOF(argv), argv, NULL, &s) == CLI_EXIT_OK);
        assert(strcmp(s.idempotency_key, "abc") == 0);
        assert(s.wait && s.wait_timeout_ms == 2500);
        assert(ctx.json);
        assert(strcmp(ctx.url, "http://h:1") == 0);
        _cleanup_free_ char *got = json_dumps(s.spec, JSON_COMPACT | JSON_SORT_KEYS);
        assert(strcmp(got, "{\"command\":[\"sleep\",\"1\"]}") == 0);
        cli_submit_done(&s);

        /* The key also comes from the environment, the flag winning. */
        setenv("AXCTL_IDEMPOTENCY_KEY", "from-env", 1);
        char *argv2[] = {"--", "true"};
        assert(cli_submit_parse(&ctx, 2, argv2, NULL, &s) == CLI_EXIT_OK);
        assert(strcmp(s.idempotency_key, "from-env") == 0);
        cli_submit_done(&s);
        char *argv3[] = {"--idempotency-key", "flag", "--", "true"};
        assert(cli_submit_parse(&ctx, 4, argv3, NULL, &s) == CLI_EXIT_OK);
        assert(strcmp(s.idempotency_key, "flag") == 0);
        cli_submit_done(&s);
        unsetenv("AXCTL_IDEMPOTENCY_KEY");
        ctx_done(&ctx, &err);
}

static void test_file_merge(void) {
        Capture err;
        CliContext ctx = ctx_new(&err);
        char *argv[] = {"-f", "-", "--priority", "5", "--env", "B=2", "--cpus", "4"};
        CliSubmit s;
        assert(cli_submit_parse(&ctx, ELEMENTSOF(argv), argv, "alice", &s) == CLI_EXIT_OK);
        assert(strcmp(s.spec_file, "-") == 0);

        const char *file = "{\"command\": [\"train\"], \"ranks\": 2, \"priority\": 1,"
                           " \"user\": \"bob\", \"env\": {\"A\": \"1\"},"
                           " \"resources\": {\"accelerator\": \"fake\", \"cpus\": 1}}";
        FILE *in = fmemopen((void *) file, strlen(file), "r");
        assert(cli_submit_load_file(&ctx, &s, in) == CLI_EXIT_OK);
        fclose(in);
        _cleanup_free_ char *got = json_dumps(s.spec, JSON_COMPACT | JSON_SORT_KEYS);
        assert(strcmp(got, "{\"command\":[\"train\"],\"env\":{\"A\":\"1\",\"B\":\"2\"},"
                           "\"priority\":5,\"ranks\":2,"
                           "\"resources\":{\"accelerator\":\"fake\",\"cpus\":4},"
                           "\"user\":\"bob\"}") == 0);
        cli_submit_done(&s);

        /* A broken file is a usage error naming line and column. */
        assert(cli_submit_parse(&ctx, 2, (char *[]){"-f", "-"}, NULL, &s) == CLI_EXIT_OK);
        const char *broken = "{\"ranks\": 2,\n \"command\": }";
        in = fmemopen((void *) broken, strlen(broken), "r");
        assert(cli_submit_load_file(&ctx, &s, in) == CLI_EXIT_USAGE);
        fclose(in);
        fflush(err.f);
        assert(strstr(err.text, "axctl: <stdin>: line 2"));
        cli_submit_done(&s);

        assert(cli_submit_parse(&ctx, 2, (char *[]){"-f", "-"}, NULL, &s) == CLI_EXIT_OK);
        in = fmemopen((void *) "[1]", 3, "r");
        assert(cli_submit_load_file(&ctx, &s, in) == CLI_EXIT_USAGE);
        fclose(in);
        cli_submit_done(&s);

        assert(cli_submit_parse(&ctx, 2, (char *[]){"-f", "/nonexistent/job.json"}, NULL, &s) ==
               CLI_EXIT_OK);
        assert(cli_submit_load_file(&ctx, &s, NULL) == CLI_EXIT_USAGE);
        fflush(err.f);
        assert(strstr(err.text, "cannot open /nonexistent/job.json"));
        cli_submit_done(&s);
        ctx_done(&ctx, &err);
}

static void test_errors(void) {
        check_usage_error("unknown flag --foo for submit (see axctl submit --help)",
                          (char *[]){"--foo", "--", "true", NULL});
        check_usage_error("unknown flag -x for submit", (char *[]){"-x", "--", "true", NULL});
        check_usage_error("flag --ranks for submit needs a value", (char *[]){"--ranks", NULL});
        check_usage_error("--ranks: not an integer: 'two'",
                          (char *[]){"--ranks", "two", "--", "true", NULL});
        check_usage_error("--cpus: -1 is out of range",
                          (char *[]){"--cpus", "-1", "--", "true", NULL});
        check_usage_error("--env: expected KEY=VALUE",
                          (char *[]){"--env", "NOVALUE", "--", "true", NULL});
        check_usage_error("--label: expected KEY=VALUE",
                          (char *[]){"--label", "=x", "--", "true", NULL});
        check_usage_error("--framework: unknown framework 'mxnet'",
                          (char *[]){"--framework", "mxnet", "--", "true", NULL});
        check_usage_error("submit needs a command", (char *[]){"--ranks", "1", NULL});
        check_usage_error("submit needs a command", (char *[]){"--", NULL});
        check_usage_error("--timeout needs --wait",
                          (char *[]){"--timeout", "3", "--", "true", NULL});
        check_usage_error("flag --wait takes no value",
                          (char *[]){"--wait=yes", "--", "true", NULL});
}

static void test_help(void) {
        Capture err, out;
        CliContext ctx = ctx_new(&err);
        out.f = ctx.out = open_memstream(&out.text, &out.len);
        CliSubmit s;
        assert(cli_submit_parse(&ctx, 1, (char *[]){"-h"}, NULL, &s) == CLI_EXIT_OK);
        assert(s.help);
        fflush(out.f);
        assert(strncmp(out.text, "Usage: axctl submit ", 20) == 0);
        cli_submit_done(&s);
        fclose(out.f);
        free(out.text);
        ctx_done(&ctx, &err);
}

int main(void) {
        test_minimal();
        test_all_flags();
        test_options_not_in_spec();
        test_file_merge();
        test_errors();
        test_help();
        printf("cli-submit: ok\n");
        return 0;
}
