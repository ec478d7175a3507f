/* SPDX-License-Identifier: MIT */
/*
 * Controller URLs as axagent --controller and axctl --url take them: one base URL, or
 * several separated by commas when controllers fail over (one leads, the others
 * redirect to it). Both clients parse them here, so a URL that one refuses the other
 * refuses with the same words, and both compare a redirect's target with their
 * configuration the same way: by scheme, host and port, the boundary a bearer token
 * must not cross.
 *
 * Library-like: nothing here logs. Errors come back as one-line strings.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The most URLs one list may hold: a handful of controllers, not a fleet. */
#define URL_LIST_MAX 16

typedef struct Url {
        bool tls; /* https */
        char *host; /* without the brackets of an IPv6 literal */
        char *port; /* "80" or "443" when the URL names none */
        char *authority; /* as a Host header carries it */
        char *target; /* path and query, "/" at least */
} Url;

/* Parses an http:// or https:// URL. Returns 0, or -EINVAL with *ret_error (owned by
 * the caller; it does not repeat the URL: the caller names it). */
int url_parse(const char *s, Url *ret, char **ret_error);
void url_done(Url *u);
/* Whether a and b have the same scheme, host and port. */
bool url_same_origin(const Url *a, const Url *b);
/* The absolute URL a Location header points to from base; NULL for a relative path
 * that does not start with '/' (no server of ours sends one). Owned by the caller. */
char *url_resolve(const Url *base, const char *location);
/* s for a URL's path or query: all but RFC 3986's unreserved characters as %XX (new
 * string). */
char *url_escape(const char *s);

typedef struct UrlList {
        char **items; /* base URLs, trailing slashes removed */
        size_t n;
} UrlList;

/*
 * Splits "URL[,URL...]" into a list of at least one base URL, each valid for url_parse
 * and without query or fragment (paths are appended to it). Blanks around an item are
 * dropped. Returns 0, or -EINVAL with *ret_error (naming the bad item when there are
 * several); *ret is not written on failure.
 */
int url_list_parse(const char *text, UrlList *ret, char **ret_error);
void url_list_done(UrlList *l);
/* Index of the first item with the scheme, host and port of url; -1 for none, and for
 * a url that does not parse. */
int url_list_find_origin(const UrlList *l, const char *url);
