/* SPDX-License-Identifier: MIT */
/*
 * Token generation and the offline admin command. A token is 256 random bits; a stolen
 * database holds only hashes (common/token.c), which do not authenticate.
 */
#include "tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util.h"

static const char *const role_names[_TOKEN_ROLE_MAX] = {
        [TOKEN_ROLE_ADMIN] = "admin",
        [TOKEN_ROLE_USER] = "user",
        [TOKEN_ROLE_AGENT] = "agent",
};

const char *token_role_to_string(TokenRole r) {
        return r >= 0 && r < _TOKEN_ROLE_MAX ? role_names[r] : NULL;
}

TokenRole token_role_from_string(const char *s) {
        for (int i = 0; i < _TOKEN_ROLE_MAX; i++)
                if (s && strcmp(s, role_names[i]) == 0)
                        return (TokenRole) i;
        return _TOKEN_ROLE_INVALID;
}

int token_generate(char **ret_token) {
        unsigned char raw[32];
        size_t got = 0;
        while (got < sizeof(raw)) {
                ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t) n;
        }
        char text[4 + 2 * sizeof(raw) + 1];
        memcpy(text, "axt_", 4);
        token_hex(raw, sizeof(raw), text + 4);
        *ret_token = xstrdup(text);
        return 0;
}

/* Creates a new secret file; -EEXIST when one appeared meanwhile. */
static int log_secret_create(const char *path, char **ret_error) {
        _cleanup_free_ char *raw = NULL;
        int r = token_generate(&raw);
        if (r < 0) {
                *ret_error = xasprintf("cannot draw random bytes: %s", strerror(-r));
                return r;
        }
        const char *hex = raw + 4; /* past "axt_": 64 hex digits */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = -errno;
                if (r != -EEXIST)
                        *ret_error = xasprintf("cannot create %s: %s", path, strerror(-r));
                return r;
        }
        bool ok = write(fd, hex, strlen(hex)) == (ssize_t) strlen(hex) && write(fd, "\n", 1) == 1 &&
                  fsync(fd) == 0;
        r = ok ? 0 : -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        explicit_bzero(raw, strlen(raw));
        if (r < 0) {
                unlink(path);
                *ret_error = xasprintf("cannot write %s: %s", path, strerror(-r));
        }
        return r;
}

int ctl_log_secret_load(const char *path, char ret_secret[TOKEN_HASH_HEX], char **ret_error) {
        for (int attempt = 0; attempt < 2; attempt++) {
                char *secret = NULL, *error = NULL;
                int r = token_file_read(path, &secret, &error);
                if (r == -ENOENT) {
                        free(error);
                        r = log_secret_create(path, ret_error);
                        if (r == -EEXIST)
                                continue;
                        if (r < 0)
                                return r;
                        continue;
                }
                if (r < 0) {
                        *ret_error = error;
                        return r;
                }
                bool valid = token_hex_valid(secret);
                if (valid)
                        memcpy(ret_secret, secret, TOKEN_HASH_HEX);
                token_free_secret(secret);
                if (!valid) {
                        *ret_error = xasprintf("%s does not hold 64 hex digits: remove it and "
                                               "a new one is made (log links signed before "
                                               "stop working until agents register again)",
                                               path);
                        return -EINVAL;
                }
                return 0;
        }
        *ret_error = xasprintf("%s keeps changing under us", path);
        return -EAGAIN;
}

static void token_usage(FILE *f) {
        fputs("Usage: axctld token create --db PATH|URL --name NAME --role admin|user|agent\n"
              "                           [--project P]... [--node NODE]\n"
              "       axctld token revoke --db PATH|URL NAME\n"
              "       axctld token list --db PATH|URL\n"
              "\n"
              "Manages API tokens in the state database (also while axctld runs). create prints\n"
              "the new token once: only its SHA-256 hash is stored. A user token is bound to the\n"
              "projects named with --project; an agent token to one node.\n",
              f);
}

static int print_token(void *userdata, const StoreToken *t) {
        char when[40];
        printf("%-20s %-6s %-30s %-12s %s%s\n", t->name, t->role, t->projects,
               t->node ? t->node : "-", util_format_time(t->created_ms, when, sizeof(when)),
               t->revoked_ms != STORE_NONE ? " (revoked)" : "");
        return 0;
}

int token_command(int argc, char **argv) {
        static const struct option options[] = {
                {"db", required_argument, NULL, 'd'},
                {"name", required_argument, NULL, 'n'},
                {"role", required_argument, NULL, 'r'},
                {"project", required_argument, NULL, 'p'},
                {"node", required_argument, NULL, 'N'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                token_usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        const char *verb = argv[1], *db = NULL, *name = NULL, *role_s = NULL, *node = NULL;
        json_t *projects = json_array();
        int c, status = 2;
        optind = 2;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'd':
                        db = optarg;
                        break;
                case 'n':
                        name = optarg;
                        break;
                case 'r':
                        role_s = optarg;
                        break;
                case 'p':
                        json_array_append_new(projects, json_string(optarg));
                        break;
                case 'N':
                        node = optarg;
                        break;
                case 'h':
                        token_usage(stdout);
                        json_decref(projects);
                        return 0;
                default:
                        fprintf(stderr, "axctld: see axctld token --help\n");
                        json_decref(projects);
                        return 2;
                }
        }
        if (strcmp(verb, "revoke") == 0 && optind < argc)
                name = argv[optind++];
        if (optind < argc) {
                fprintf(stderr, "axctld token: unexpected argument '%s'\n", argv[optind]);
                goto out;
        }
        if (!db) {
                fprintf(stderr, "axctld token: --db PATH is required\n");
                goto out;
        }
        TokenRole role = token_role_from_string(role_s);
        if (strcmp(verb, "create") == 0) {
                if (!name || role == _TOKEN_ROLE_INVALID) {
                        fprintf(stderr, "axctld token create: needs --name and --role "
                                        "admin|user|agent\n");
                        goto out;
                }
                if (role == TOKEN_ROLE_USER && json_array_size(projects) == 0) {
                        fprintf(stderr, "axctld token create: a user token needs --project\n");
                        goto out;
                }
                if (role == TOKEN_ROLE_AGENT && !node) {
                        fprintf(stderr, "axctld token create: an agent token needs --node\n");
                        goto out;
                }
                if ((role != TOKEN_ROLE_AGENT && node) ||
                    (role != TOKEN_ROLE_USER && json_array_size(projects) > 0)) {
                        fprintf(stderr, "axctld token create: --project is for user tokens, "
                                        "--node for agent tokens\n");
                        goto out;
                }
        } else if (strcmp(verb, "revoke") == 0) {
                if (!name) {
                        fprintf(stderr, "axctld token revoke: needs the token's NAME\n");
                        goto out;
                }
        } else if (strcmp(verb, "list") != 0) {
                fprintf(stderr, "axctld token: unknown command '%s' (create, revoke, list)\n",
                        verb);
                goto out;
        }

        Store *store = NULL;
        int r = store_open(db, &store);
        if (r < 0) {
                _cleanup_free_ char *shown = store_target_display(db);
                const char *why = store_last_error(NULL);
                fprintf(stderr, "axctld token: cannot open %s: %s\n", shown,
                        *why ? why : strerror(-r));
                status = 1;
                goto out;
        }
        status = 1;
        if (strcmp(verb, "list") == 0) {
                printf("%-20s %-6s %-30s %-12s %s\n", "NAME", "ROLE", "PROJECTS", "NODE",
                       "CREATED");
                r = store_tokens_list(store, print_token, NULL);
                status = r < 0 ? 1 : 0;
        } else if (strcmp(verb, "revoke") == 0) {
                r = store_token_revoke(store, name, util_wall_ms());
                if (r == -ENOENT)
                        fprintf(stderr, "axctld token: no valid token named %s\n", name);
                else if (r < 0)
                        fprintf(stderr, "axctld token: %s\n", store_last_error(store));
                else
                        status = 0;
        } else {
                _cleanup_free_ char *token = NULL,
                                    *projects_text = json_dumps(projects, JSON_COMPACT);
                char hash[TOKEN_HASH_HEX];
                if (token_generate(&token) < 0 || token_hash(token, hash) < 0) {
                        fprintf(stderr, "axctld token: cannot make a random token\n");
                } else {
                        StoreToken t = {.name = name,
                                        .hash = hash,
                                        .role = role_s,
                                        .projects = projects_text,
                                        .node = role == TOKEN_ROLE_AGENT ? node : NULL,
                                        .created_ms = util_wall_ms()};
                        r = store_token_insert(store, &t);
                        if (r == -EEXIST)
                                fprintf(stderr, "axctld token: a token named %s exists\n", name);
                        else if (r < 0)
                                fprintf(stderr, "axctld token: %s\n", store_last_error(store));
                        else {
                                printf("%s\n", token);
                                status = 0;
                        }
                }
        }
        store_close(store);
out:
        json_decref(projects);
        return status;
}

void token_identity_clear(TokenIdentity *id) {
        free(id->name);
        json_decref(id->projects);
        free(id->node);
        *id = (TokenIdentity){.role = _TOKEN_ROLE_INVALID};
}

bool token_identity_has_project(const TokenIdentity *id, const char *project) {
        if (id->role == TOKEN_ROLE_ADMIN)
                return true;
        if (id->role != TOKEN_ROLE_USER)
                return false;
        size_t i;
        json_t *p;
        json_array_foreach(id->projects, i, p) {
                if (json_is_string(p) && strcmp(json_string_value(p), project) == 0)
                        return true;
        }
        return false;
}
