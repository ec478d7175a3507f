/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/url.c: the URLs axctl and axagent accept, the lists of them that
 * --url and --controller take (and the one-line reasons for refusing one), and the
 * comparison by scheme, host and port that decides where a redirect may take a token.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "url.h"
#include "util.h"

static void test_parse(void) {
        Url u;
        char *err = NULL;
        CHECK_INT(url_parse("http://Ctl.example.com:8470/axctl/v1/jobs?x=1#f", &u, &err), 0);
        CHECK(!u.tls);
        CHECK_STR(u.host, "Ctl.example.com");
        CHECK_STR(u.port, "8470");
        CHECK_STR(u.authority, "Ctl.example.com:8470");
        CHECK_STR(u.target, "/axctl/v1/jobs?x=1");
        url_done(&u);
        CHECK_INT(url_parse("https://[::1]", &u, &err), 0);
        CHECK(u.tls);
        CHECK_STR(u.host, "::1");
        CHECK_STR(u.port, "443");
        CHECK_STR(u.target, "/");
        url_done(&u);

        const char *bad[][2] = {
                {"ftp://h", "unsupported URL (http:// or https:// only)"},
                {"h:1", "unsupported URL (http:// or https:// only)"},
                {"http://", "invalid URL: expected scheme://host[:port]"},
                {"http://h:0", "invalid URL: expected scheme://host[:port]"},
                {"http://h:65536", "invalid URL: expected scheme://host[:port]"},
                {"http://h:1x", "invalid URL: expected scheme://host[:port]"},
                {"http://u@h", "invalid URL: expected scheme://host[:port]"},
                {"http://[::1", "invalid URL: expected scheme://host[:port]"},
                {"http://h/a b", "invalid URL: spaces or control characters"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                CHECK_INT(url_parse(bad[i][0], &u, &err), -EINVAL);
                CHECK_STR(err, bad[i][1]);
                free(err);
                err = NULL;
        }
}

static bool same(const char *a, const char *b) {
        Url x, y;
        char *err = NULL;
        CHECK_INT(url_parse(a, &x, &err), 0);
        CHECK_INT(url_parse(b, &y, &err), 0);
        bool r = url_same_origin(&x, &y);
        url_done(&x);
        url_done(&y);
        return r;
}

static void test_origin(void) {
        CHECK(same("http://h:80/a", "HTTP://H/b?c"));
        CHECK(same("http://h:01", "http://h:1"));
        CHECK(same("https://h", "https://h:443/x"));
        CHECK(!same("http://h", "https://h"));
        CHECK(!same("http://h:1", "http://h:2"));
        CHECK(!same("http://h", "http://h.evil"));

        Url base;
        char *err = NULL;
        CHECK_INT(url_parse("https://a:1/x", &base, &err), 0);
        char *r = url_resolve(&base, "/v1/jobs");
        CHECK_STR(r, "https://a:1/v1/jobs");
        free(r);
        r = url_resolve(&base, "//b:2/y");
        CHECK_STR(r, "https://b:2/y");
        free(r);
        r = url_resolve(&base, "http://c/z");
        CHECK_STR(r, "http://c/z");
        free(r);
        CHECK(!url_resolve(&base, "relative"));
        url_done(&base);
}

/* Parses a list and returns "item|item" or the error, for comparison. */
static char *list(const char *text) {
        UrlList l;
        char *err = NULL;
        if (url_list_parse(text, &l, &err) < 0) {
                char *shown = xasprintf("error: %s", err);
                free(err);
                return shown;
        }
        CHECK(!err);
        char *joined = xstrdup("");
        for (size_t i = 0; i < l.n; i++) {
                char *next = xasprintf("%s%s%s", joined, i ? "|" : "", l.items[i]);
                free(joined);
                joined = next;
        }
        url_list_done(&l);
        return joined;
}

static void check_list(const char *text, const char *want) {
        _cleanup_free_ char *got = list(text);
        CHECK_STR(got, want);
}

static void test_list(void) {
        check_list("http://a:1", "http://a:1");
        check_list("http://a:1/", "http://a:1");
        check_list("https://gw/axctl//", "https://gw/axctl");
        check_list("http://a:1, http://b:2/ ,\thttps://c", "http://a:1|http://b:2|https://c");
        check_list("http://a:1,http://a:1", "http://a:1|http://a:1");

        /* One URL: the reason alone (the caller names the URL); several: the item too. */
        check_list("ftp://a", "error: unsupported URL (http:// or https:// only)");
        check_list("http://a:1,ftp://b", "error: ftp://b: unsupported URL (http:// or https:// "
                                         "only)");
        check_list("", "error: an empty URL in the list");
        check_list("http://a:1,", "error: an empty URL in the list");
        check_list(",http://a:1", "error: an empty URL in the list");
        check_list("http://a:1,  ,http://b:2", "error: an empty URL in the list");
        check_list("http://a:1/?x", "error: a controller URL has no query or fragment");
        check_list("http://a:1,http://b#f",
                   "error: http://b#f: a controller URL has no query or fragment");
        check_list("http://a:1,http://u@b", "error: http://u@b: invalid URL: expected "
                                            "scheme://host[:port]");

        _cleanup_free_ char *many = xstrdup("http://a");
        for (int i = 1; i < URL_LIST_MAX; i++) {
                char *next = xasprintf("%s,http://a", many);
                free(many);
                many = next;
        }
        _cleanup_free_ char *got = list(many);
        CHECK(strncmp(got, "error", 5) != 0);
        _cleanup_free_ char *too_many = xasprintf("%s,http://a", many);
        check_list(too_many, "error: more than 16 URLs");
}

static void test_find_origin(void) {
        UrlList l;
        char *err = NULL;
        CHECK_INT(url_list_parse("http://a:1,https://b,http://c:3/prefix", &l, &err), 0);
        CHECK_INT(url_list_find_origin(&l, "http://a:1/v1/agent/sync?wait_ms=1"), 0);
        CHECK_INT(url_list_find_origin(&l, "https://B:443/v1/jobs"), 1);
        CHECK_INT(url_list_find_origin(&l, "http://c:3/v1/jobs"), 2);
        CHECK_INT(url_list_find_origin(&l, "http://b/v1/jobs"), -1); /* not https */
        CHECK_INT(url_list_find_origin(&l, "http://a:2/"), -1);
        CHECK_INT(url_list_find_origin(&l, "http://evil/?http://a:1"), -1);
        CHECK_INT(url_list_find_origin(&l, "http://u@a:1/"), -1);
        CHECK_INT(url_list_find_origin(&l, "not a url"), -1);
        url_list_done(&l);
}

int main(void) {
        test_parse();
        test_origin();
        test_list();
        test_find_origin();
        printf("url: ok\n");
        return 0;
}
