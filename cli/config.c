/* SPDX-License-Identifier: MIT */
/*
 * Where axctl gets its controller URL, credentials and CA from. Each setting has one
 * order of precedence, highest first:
 *
 *   url      --url, $AXCTL_URL, the config file's `url`, http://127.0.0.1:8470; each may
 *            name several controllers, comma separated (route.c)
 *   token    $AXCTL_TOKEN, the config file's `token`
 *   ca_file  --ca-file, $AXCTL_CA_FILE, the config file's `ca_file`
 *
 * The config file is $AXCTL_CONFIG (which must exist when set), else
 * $XDG_CONFIG_HOME/axctl/config, else ~/.config/axctl/config (read only if it exists),
 * in the `key = value` syntax of the daemons' files (common/config.h). A file that holds
 * a token must be private to its owner: a token others can read is a token others can
 * use, and one others can write lets them point axctl at their own controller. There is
 * no token flag on purpose: a flag shows up in `ps` and in shell history.
 */
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "token.h"

void cli_context_set_url(CliContext *ctx, const char *url) {
        free(ctx->url);
        ctx->url = xstrdup(url);
        /* Paths are appended as "/v1/...": a trailing slash would double it. (Each URL of
         * a list loses its own in route.c, which checks them.) */
        size_t n = strlen(ctx->url);
        while (n > 0 && ctx->url[n - 1] == '/')
                ctx->url[--n] = '\0';
        if (!ctx->url_current)
                ctx->url_current = xmalloc(sizeof(*ctx->url_current));
        *ctx->url_current = 0;
}

void cli_context_set_ca_file(CliContext *ctx, const char *path) {
        free(ctx->ca_file);
        ctx->ca_file = path && *path ? xstrdup(path) : NULL;
}

char *cli_config_path(void) {
        const char *p = getenv("AXCTL_CONFIG");
        if (p && *p)
                return xstrdup(p);
        const char *xdg = getenv("XDG_CONFIG_HOME");
        if (xdg && *xdg == '/')
                return xasprintf("%s/axctl/config", xdg);
        const char *home = getenv("HOME");
        if (home && *home)
                return xasprintf("%s/.config/axctl/config", home);
        return NULL;
}

/* Applies the entries of a parsed config file; -EINVAL with *ret_error on a bad key. */
static int config_apply(const ConfigFile *cf, CliConfig *ret, char **ret_error) {
        for (size_t i = 0; i < config_file_size(cf); i++) {
                const ConfigEntry *e = config_file_entry(cf, i);
                char **field;
                if (strcmp(e->key, "url") == 0)
                        field = &ret->url;
                else if (strcmp(e->key, "ca_file") == 0)
                        field = &ret->ca_file;
                else if (strcmp(e->key, "token") == 0)
                        field = &ret->token;
                else {
                        *ret_error = xasprintf("%s:%u: unknown key %s (url, token, ca_file)",
                                               config_file_path(cf), e->line, e->key);
                        return -EINVAL;
                }
                if (field == &ret->token) {
                        token_free_secret(ret->token);
                        ret->token = NULL;
                        if (*e->value && !token_valid(e->value)) {
                                /* Never echo it: it is probably a real token, mangled. */
                                *ret_error = xasprintf("%s:%u: token must be one word of "
                                                       "visible ASCII characters",
                                                       config_file_path(cf), e->line);
                                return -EINVAL;
                        }
                } else {
                        free(*field);
                }
                *field = *e->value ? xstrdup(e->value) : NULL;
        }
        return 0;
}

int cli_config_load(const char *path, bool must_exist, CliConfig *ret, char **ret_error) {
        *ret = (CliConfig){0};
        if (!path)
                return 0;
        char *text = NULL;
        struct stat st;
        int r = token_file_load(path, &text, &st, ret_error);
        if (r == -ENOENT && !must_exist) {
                free(*ret_error);
                *ret_error = NULL;
                return 0;
        }
        if (r < 0)
                return r;

        ConfigFile *cf = NULL;
        r = config_file_parse(path, text, &cf, ret_error);
        token_free_secret(text);
        if (r < 0)
                return r;
        r = config_apply(cf, ret, ret_error);
        config_file_free(cf);
        if (r >= 0 && ret->token)
                r = token_check_private(path, &st, ret_error);
        if (r < 0) {
                cli_config_done(ret);
                return r;
        }
        return 0;
}

void cli_config_done(CliConfig *c) {
        free(c->url);
        free(c->ca_file);
        token_free_secret(c->token);
        *c = (CliConfig){0};
}

int cli_context_configure(CliContext *ctx, char **ret_error) {
        _cleanup_free_ char *path = cli_config_path();
        const char *explicit_path = getenv("AXCTL_CONFIG");
        CliConfig cfg;
        int r = cli_config_load(path, explicit_path && *explicit_path, &cfg, ret_error);
        if (r < 0)
                return r;

        const char *env_url = getenv("AXCTL_URL");
        cli_context_set_url(ctx, env_url && *env_url ? env_url
                                 : cfg.url           ? cfg.url
                                                     : CLI_DEFAULT_URL);
        const char *env_ca = getenv("AXCTL_CA_FILE");
        cli_context_set_ca_file(ctx, env_ca && *env_ca ? env_ca : cfg.ca_file);

        const char *env_token = getenv("AXCTL_TOKEN");
        if (env_token && *env_token) {
                if (!token_valid(env_token)) {
                        cli_config_done(&cfg);
                        *ret_error = xstrdup("AXCTL_TOKEN must be one word of visible ASCII "
                                             "characters");
                        return -EINVAL;
                }
                ctx->token = xstrdup(env_token);
        } else {
                ctx->token = TAKE_PTR(cfg.token);
        }
        cli_config_done(&cfg);
        return 0;
}

void cli_context_done(CliContext *ctx) {
        free(ctx->url);
        free(ctx->url_current);
        free(ctx->ca_file);
        token_free_secret(ctx->token);
        ctx->url = ctx->ca_file = ctx->token = NULL;
        ctx->url_current = NULL;
}
