/* SPDX-License-Identifier: MIT */
/*
 * axwork: a stand-in training rank for the integration tests. It follows the rank
 * contract of DESIGN.md §6 the way a real trainer would: it reads the AXCTL_* variables,
 * advances a deterministic 64-bit state one step at a time, reports every step through
 * AXCTL_PROGRESS_FILE, and (rank 0 only) commits AXLearn-layout checkpoints
 * `<dir>/step_%08d/` whose `index` file appears last and atomically. Started with
 * AXCTL_RESUME_STEP > 0 it loads the state of that checkpoint and continues, so a run
 * interrupted any number of times prints the same `final value` as one that never was.
 *
 * Faults are injected from the command line (crash, exit code, hang; optionally only in
 * one attempt and one rank), and an append-only attempt log records when each attempt of
 * each rank started, stepped and ended, so a test can prove that attempts never overlap.
 * Plain libc on purpose: the workload must not depend on the code it tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FAULTS 32
#define EXIT_USAGE 2
/* A rank that cannot load the checkpoint it was told to resume from must not pretend. */
#define EXIT_BAD_RESUME 66
#define INITIAL_VALUE UINT64_C(0xcbf29ce484222325)

extern char **environ;

typedef enum FaultKind {
        FAULT_CRASH,
        FAULT_EXIT,
        FAULT_HANG,
        _FAULT_KIND_MAX,
        _FAULT_KIND_INVALID = -1,
} FaultKind;

typedef struct Fault {
        FaultKind kind;
        uint64_t step;
        int code; /* exit status, FAULT_EXIT only */
        int attempt; /* 0: every attempt */
} Fault;

typedef struct Options {
        uint64_t steps;
        unsigned step_ms;
        uint64_t checkpoint_every;
        unsigned checkpoint_ms; /* how long writing one takes, the steps standing still */
        uint64_t seed;
        int fault_rank; /* -1: faults hit every rank */
        const char *attempt_log;
        bool print_env;
        bool expect;
        Fault faults[MAX_FAULTS];
        size_t n_faults;
} Options;

typedef struct Rank {
        const char *job_id;
        int attempt;
        int rank;
        int world_size;
        const char *checkpoint_dir;
        const char *resume_checkpoint;
        const char *progress_file;
        uint64_t resume_step;
        int log_fd;
} Rank;

static volatile sig_atomic_t terminate_signal;

static void on_terminate(int sig) {
        terminate_signal = sig;
}

/* One step of "training": a splitmix64 finaliser over the state and the step number.
 * tests/integration/axtest.py carries the same function to predict final values. */
static uint64_t work_step(uint64_t value, uint64_t step) {
        uint64_t z = value ^ (step * UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static int64_t wall_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Appends "EVENT job=.. attempt=.. rank=.. pid=.. t=<CLOCK_REALTIME ns> DETAIL" with a
 * single write(2) on an O_APPEND descriptor, so lines of concurrent ranks and attempts
 * never interleave. */
__attribute__((format(printf, 3, 4))) static void attempt_log(const Rank *r, const char *event,
                                                              const char *fmt, ...) {
        if (r->log_fd < 0)
                return;
        char line[512];
        int n = snprintf(line, sizeof(line), "%s job=%s attempt=%d rank=%d pid=%d t=%" PRId64,
                         event, r->job_id, r->attempt, r->rank, (int) getpid(), wall_ns());
        if (fmt && n < (int) sizeof(line) - 2) {
                line[n++] = ' ';
                va_list ap;
                va_start(ap, fmt);
                n += vsnprintf(line + n, sizeof(line) - (size_t) n - 1, fmt, ap);
                va_end(ap);
        }
        if (n > (int) sizeof(line) - 2)
                n = (int) sizeof(line) - 2;
        line[n++] = '\n';
        (void) !write(r->log_fd, line, (size_t) n);
}

static int parse_u64(const char *s, uint64_t *ret) {
        if (!s || !*s || *s == '-')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_int(const char *s, int min, int max, int *ret) {
        if (!s || !*s)
                return -EINVAL;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = (int) v;
        return 0;
}

/* Parses "STEP[@ATTEMPT]" or, for exits, "STEP:CODE[@ATTEMPT]". */
static int fault_parse(FaultKind kind, const char *arg, Fault *ret) {
        char buf[128];
        if (strlen(arg) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, arg);

        Fault f = {.kind = kind};
        char *at = strchr(buf, '@');
        if (at) {
                *at = '\0';
                if (parse_int(at + 1, 1, INT_MAX, &f.attempt) < 0)
                        return -EINVAL;
        }
        char *colon = strchr(buf, ':');
        if (kind == FAULT_EXIT) {
                if (!colon)
                        return -EINVAL;
                *colon = '\0';
                if (parse_int(colon + 1, 0, 255, &f.code) < 0)
                        return -EINVAL;
        } else if (colon) {
                return -EINVAL;
        }
        if (parse_u64(buf, &f.step) < 0 || f.step == 0)
                return -EINVAL;
        *ret = f;
        return 0;
}

static const char *env_str(const char *name) {
        const char *v = getenv(name);
        return v ? v : "";
}

static int env_int(const char *name, int fallback, int min, int *ret) {
        const char *v = getenv(name);
        if (!v || !*v) {
                *ret = fallback;
                return 0;
        }
        if (parse_int(v, min, INT_MAX, ret) < 0) {
                fprintf(stderr, "axwork: %s=%s is not a valid number\n", name, v);
                return -EINVAL;
        }
        return 0;
}

static int rank_from_env(Rank *r) {
        *r = (Rank){.log_fd = -1};
        r->job_id = *env_str("AXCTL_JOB_ID") ? env_str("AXCTL_JOB_ID") : "0";
        if (env_int("AXCTL_ATTEMPT", 1, 1, &r->attempt) < 0 ||
            env_int("AXCTL_RANK", 0, 0, &r->rank) < 0 ||
            env_int("AXCTL_WORLD_SIZE", 1, 1, &r->world_size) < 0)
                return -EINVAL;
        if (r->rank >= r->world_size) {
                fprintf(stderr, "axwork: AXCTL_RANK %d outside world of %d\n", r->rank,
                        r->world_size);
                return -EINVAL;
        }
        r->checkpoint_dir = env_str("AXCTL_CHECKPOINT_DIR");
        r->resume_checkpoint = env_str("AXCTL_RESUME_CHECKPOINT");
        r->progress_file = env_str("AXCTL_PROGRESS_FILE");
        const char *rs = env_str("AXCTL_RESUME_STEP");
        r->resume_step = 0;
        if (*rs && parse_u64(rs, &r->resume_step) < 0) {
                fprintf(stderr, "axwork: AXCTL_RESUME_STEP=%s is not a step\n", rs);
                return -EINVAL;
        }
        return 0;
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Prints the environment sorted, one "env NAME=VALUE" line each, for tests to parse. */
static void print_env(void) {
        size_t n = 0;
        while (environ[n])
                n++;
        char **copy = calloc(n + 1, sizeof(char *));
        if (!copy)
                abort();
        memcpy(copy, environ, n * sizeof(char *));
        qsort(copy, n, sizeof(char *), compare_strings);
        for (size_t i = 0; i < n; i++)
                printf("env %s\n", copy[i]);
        free(copy);
}

/* Replaces path with text through a temporary sibling and rename(2). */
static int write_atomic(const char *path, const char *text) {
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int) getpid()) >= (int) sizeof(tmp))
                return -ENAMETOOLONG;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        ssize_t n = write(fd, text, len);
        int r = n == (ssize_t) len ? 0 : (n < 0 ? -errno : -EIO);
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

static int mkdir_p(const char *path) {
        char buf[PATH_MAX];
        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        strcpy(buf, path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* Commits checkpoint `step`: the state first, then `index`, whose presence is what
 * makes the step committed for the agent's scan and for a resume. A step directory left
 * half-written by an earlier attempt is simply overwritten. */
static int checkpoint_write(const Rank *r, uint64_t step, uint64_t value) {
        char dir[PATH_MAX], path[PATH_MAX], text[128];
        if (snprintf(dir, sizeof(dir), "%s/step_%08" PRIu64, r->checkpoint_dir, step) >=
            (int) sizeof(dir))
                return -ENAMETOOLONG;
        int k = mkdir_p(dir);
        if (k < 0)
                return k;
        if (snprintf(path, sizeof(path), "%s/value", dir) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        snprintf(text, sizeof(text), "step %" PRIu64 "\nvalue %016" PRIx64 "\n", step, value);
        k = write_atomic(path, text);
        if (k < 0)
                return k;
        if (snprintf(path, sizeof(path), "%s/index", dir) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        snprintf(text, sizeof(text), "step %" PRIu64 "\nattempt %d\nfiles value\n", step,
                 r->attempt);
        return write_atomic(path, text);
}

/* Loads the state of the checkpoint to resume from; it must be committed (have its
 * index) and hold the step the controller asked for. */
static int checkpoint_load(const Rank *r, uint64_t *ret_value) {
        char dir[PATH_MAX], path[PATH_MAX];
        if (*r->resume_checkpoint)
                snprintf(dir, sizeof(dir), "%s", r->resume_checkpoint);
        else if (*r->checkpoint_dir)
                snprintf(dir, sizeof(dir), "%s/step_%08" PRIu64, r->checkpoint_dir, r->resume_step);
        else
                return -ENOENT;

        if (snprintf(path, sizeof(path), "%s/index", dir) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        if (access(path, F_OK) < 0) {
                fprintf(stderr, "axwork: %s is not committed: %m\n", dir);
                return -errno;
        }
        if (snprintf(path, sizeof(path), "%s/value", dir) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        FILE *f = fopen(path, "re");
        if (!f) {
                fprintf(stderr, "axwork: cannot open %s: %m\n", path);
                return -errno;
        }
        uint64_t step = 0, value = 0;
        int n = fscanf(f, "step %" SCNu64 " value %" SCNx64, &step, &value);
        fclose(f);
        if (n != 2) {
                fprintf(stderr, "axwork: %s is malformed\n", path);
                return -EBADMSG;
        }
        if (step != r->resume_step) {
                fprintf(stderr,
                        "axwork: %s holds step %" PRIu64 ", asked to resume at %" PRIu64 "\n", path,
                        step, r->resume_step);
                return -ESTALE;
        }
        *ret_value = value;
        return 0;
}

static void progress_write(const Rank *r, uint64_t step) {
        if (!*r->progress_file)
                return;
        char text[32];
        snprintf(text, sizeof(text), "%" PRIu64 "\n", step);
        int k = write_atomic(r->progress_file, text);
        if (k < 0)
                fprintf(stderr, "axwork: cannot write %s: %s\n", r->progress_file, strerror(-k));
}

/* Ends the process as the signal asked, after saying so in the attempt log. */
static _Noreturn void terminate_now(const Rank *r) {
        int sig = terminate_signal;
        attempt_log(r, "end", "status=signal:%d", sig);
        signal(sig, SIG_DFL);
        raise(sig);
        _exit(128 + sig);
}

static void sleep_ms(const Rank *r, unsigned ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                if (terminate_signal)
                        terminate_now(r);
        if (terminate_signal)
                terminate_now(r);
}

/* Returns the fault that fires when this rank reaches `step`, or NULL. */
static const Fault *fault_find(const Options *o, const Rank *r, uint64_t step) {
        if (o->fault_rank >= 0 && o->fault_rank != r->rank)
                return NULL;
        for (size_t i = 0; i < o->n_faults; i++) {
                const Fault *f = &o->faults[i];
                if (f->step == step && (f->attempt == 0 || f->attempt == r->attempt))
                        return f;
        }
        return NULL;
}

static _Noreturn void fault_fire(const Rank *r, const Fault *f, uint64_t step) {
        switch (f->kind) {
        case FAULT_CRASH:
                attempt_log(r, "end", "status=crash step=%" PRIu64, step);
                printf("crash at step %" PRIu64 "\n", step);
                fflush(stdout);
                raise(SIGKILL);
                abort();
        case FAULT_EXIT:
                attempt_log(r, "end", "status=exit:%d step=%" PRIu64, f->code, step);
                printf("exit %d at step %" PRIu64 "\n", f->code, step);
                fflush(stdout);
                _exit(f->code);
        case FAULT_HANG:
        default:
                attempt_log(r, "hang", "step=%" PRIu64, step);
                printf("hang at step %" PRIu64 "\n", step);
                fflush(stdout);
                for (;;) {
                        pause();
                        if (terminate_signal)
                                terminate_now(r);
                }
        }
}

static void usage(FILE *f) {
        fputs("Usage: axwork [OPTIONS]\n"
              "  --steps N                 total steps (default 20)\n"
              "  --step-ms M               time per step in ms (default 50)\n"
              "  --checkpoint-every K      rank 0 commits a checkpoint every K steps (0: never)\n"
              "  --checkpoint-ms M         writing a checkpoint takes M ms (default 0)\n"
              "  --crash-at STEP[@ATTEMPT] SIGKILL itself on reaching STEP\n"
              "  --exit-at STEP:CODE[@ATTEMPT] exit with CODE on reaching STEP\n"
              "  --hang-at STEP[@ATTEMPT]  stop advancing on reaching STEP\n"
              "  --fault-rank R            faults hit only rank R (default: every rank)\n"
              "  --attempt-log FILE        append start/step/end lines of each attempt\n"
              "  --seed S                  initial state seed (default 0)\n"
              "  --print-env               print the environment as 'env NAME=VALUE' lines\n"
              "  --expect                  print the final value of --steps and exit\n",
              f);
}

static int options_parse(int argc, char **argv, Options *o) {
        enum {
                ARG_STEPS = 0x100,
                ARG_STEP_MS,
                ARG_CHECKPOINT_EVERY,
                ARG_CHECKPOINT_MS,
                ARG_CRASH_AT,
                ARG_EXIT_AT,
                ARG_HANG_AT,
                ARG_FAULT_RANK,
                ARG_ATTEMPT_LOG,
                ARG_SEED,
                ARG_PRINT_ENV,
                ARG_EXPECT,
        };
        static const struct option longopts[] = {
                {"steps", required_argument, NULL, ARG_STEPS},
                {"step-ms", required_argument, NULL, ARG_STEP_MS},
                {"checkpoint-every", required_argument, NULL, ARG_CHECKPOINT_EVERY},
                {"checkpoint-ms", required_argument, NULL, ARG_CHECKPOINT_MS},
                {"crash-at", required_argument, NULL, ARG_CRASH_AT},
                {"exit-at", required_argument, NULL, ARG_EXIT_AT},
                {"hang-at", required_argument, NULL, ARG_HANG_AT},
                {"fault-rank", required_argument, NULL, ARG_FAULT_RANK},
                {"attempt-log", required_argument, NULL, ARG_ATTEMPT_LOG},
                {"seed", required_argument, NULL, ARG_SEED},
                {"print-env", no_argument, NULL, ARG_PRINT_ENV},
                {"expect", no_argument, NULL, ARG_EXPECT},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        *o = (Options){.steps = 20, .step_ms = 50, .fault_rank = -1};
        int c, ms, index = 0;
        while ((c = getopt_long(argc, argv, "h", longopts, &index)) >= 0) {
                FaultKind kind = _FAULT_KIND_INVALID;
                switch (c) {
                case 'h':
                        usage(stdout);
                        exit(0);
                case ARG_STEPS:
                        if (parse_u64(optarg, &o->steps) < 0)
                                goto bad;
                        break;
                case ARG_STEP_MS:
                        if (parse_int(optarg, 0, 3600 * 1000, &ms) < 0)
                                goto bad;
                        o->step_ms = (unsigned) ms;
                        break;
                case ARG_CHECKPOINT_EVERY:
                        if (parse_u64(optarg, &o->checkpoint_every) < 0)
                                goto bad;
                        break;
                case ARG_CHECKPOINT_MS:
                        if (parse_int(optarg, 0, 3600 * 1000, &ms) < 0)
                                goto bad;
                        o->checkpoint_ms = (unsigned) ms;
                        break;
                case ARG_CRASH_AT:
                        kind = FAULT_CRASH;
                        break;
                case ARG_EXIT_AT:
                        kind = FAULT_EXIT;
                        break;
                case ARG_HANG_AT:
                        kind = FAULT_HANG;
                        break;
                case ARG_FAULT_RANK:
                        if (parse_int(optarg, 0, INT_MAX, &o->fault_rank) < 0)
                                goto bad;
                        break;
                case ARG_ATTEMPT_LOG:
                        o->attempt_log = optarg;
                        break;
                case ARG_SEED:
                        if (parse_u64(optarg, &o->seed) < 0)
                                goto bad;
                        break;
                case ARG_PRINT_ENV:
                        o->print_env = true;
                        break;
                case ARG_EXPECT:
                        o->expect = true;
                        break;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
                if (kind != _FAULT_KIND_INVALID) {
                        if (o->n_faults >= MAX_FAULTS) {
                                fprintf(stderr, "axwork: more than %d faults\n", MAX_FAULTS);
                                return -E2BIG;
                        }
                        if (fault_parse(kind, optarg, &o->faults[o->n_faults]) < 0)
                                goto bad;
                        o->n_faults++;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "axwork: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
bad:
        fprintf(stderr, "axwork: invalid value '%s' for --%s\n", optarg, longopts[index].name);
        return -EINVAL;
}

int main(int argc, char **argv) {
        Options o;
        Rank r;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (options_parse(argc, argv, &o) < 0)
                return EXIT_USAGE;

        if (o.expect) {
                uint64_t v = INITIAL_VALUE ^ o.seed;
                for (uint64_t s = 1; s <= o.steps; s++)
                        v = work_step(v, s);
                printf("final value %016" PRIx64 "\n", v);
                return 0;
        }

        if (rank_from_env(&r) < 0)
                return EXIT_USAGE;

        struct sigaction sa = {.sa_handler = on_terminate};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        if (o.attempt_log) {
                r.log_fd = open(o.attempt_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (r.log_fd < 0) {
                        fprintf(stderr, "axwork: cannot open %s: %m\n", o.attempt_log);
                        return EXIT_USAGE;
                }
        }

        attempt_log(&r, "start", "resume_step=%" PRIu64, r.resume_step);
        printf("axwork job=%s attempt=%d rank=%d world=%d resume_step=%" PRIu64 " pid=%d\n",
               r.job_id, r.attempt, r.rank, r.world_size, r.resume_step, (int) getpid());
        if (o.print_env)
                print_env();

        uint64_t value = INITIAL_VALUE ^ o.seed;
        if (r.resume_step > 0) {
                int k = checkpoint_load(&r, &value);
                if (k < 0) {
                        attempt_log(&r, "end", "status=bad_resume");
                        fprintf(stderr, "axwork: cannot resume from step %" PRIu64 ": %s\n",
                                r.resume_step, strerror(-k));
                        return EXIT_BAD_RESUME;
                }
                progress_write(&r, r.resume_step);
        }

        for (uint64_t step = r.resume_step + 1; step <= o.steps; step++) {
                const Fault *f = fault_find(&o, &r, step);
                if (f)
                        fault_fire(&r, f, step);
                sleep_ms(&r, o.step_ms);
                value = work_step(value, step);
                progress_write(&r, step);
                attempt_log(&r, "step", "step=%" PRIu64, step);
                if (r.rank == 0 && o.checkpoint_every > 0 && *r.checkpoint_dir &&
                    step % o.checkpoint_every == 0) {
                        sleep_ms(&r, o.checkpoint_ms);
                        int k = checkpoint_write(&r, step, value);
                        if (k < 0)
                                fprintf(stderr, "axwork: checkpoint %" PRIu64 " failed: %s\n", step,
                                        strerror(-k));
                        else
                                printf("checkpoint step=%" PRIu64 "\n", step);
                }
        }
        if (terminate_signal)
                terminate_now(&r);

        printf("final value %016" PRIx64 "\n", value);
        attempt_log(&r, "end", "status=ok");
        return 0;
}
