/* SPDX-License-Identifier: MIT */
/* Controller URLs and lists of them; see url.h. */
#include "url.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

void url_done(Url *u) {
        free(u->host);
        free(u->port);
        free(u->authority);
        free(u->target);
        *u = (Url){};
}

int url_parse(const char *s, Url *ret, char **ret_error) {
        *ret = (Url){};
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p <= 0x20 || *p == 0x7f) {
                        *ret_error = xstrdup("invalid URL: spaces or control characters");
                        return -EINVAL;
                }
        ret->tls = strncasecmp(s, "https://", 8) == 0;
        if (!ret->tls && strncasecmp(s, "http://", 7) != 0) {
                *ret_error = xstrdup("unsupported URL (http:// or https:// only)");
                return -EINVAL;
        }
        const char *rest = s + (ret->tls ? 8 : 7);
        size_t n = strcspn(rest, "/?#");
        const char *host = rest, *host_end, *port = NULL;
        if (*host == '[') {
                host_end = memchr(host, ']', n);
                if (host_end && host_end + 1 < rest + n && host_end[1] == ':')
                        port = host_end + 2;
                else if (host_end && host_end + 1 != rest + n)
                        host_end = NULL;
                host++;
        } else {
                host_end = memchr(host, ':', n);
                if (host_end)
                        port = host_end + 1;
                else
                        host_end = rest + n;
        }
        size_t port_len = port ? (size_t) (rest + n - port) : 0;
        bool port_ok =
                !port || (port_len > 0 && port_len <= 5 && strspn(port, "0123456789") >= port_len &&
                          strtol(port, NULL, 10) > 0 && strtol(port, NULL, 10) <= 65535);
        if (!host_end || host_end == host || memchr(rest, '@', n) || !port_ok) {
                *ret_error = xstrdup("invalid URL: expected scheme://host[:port]");
                return -EINVAL;
        }
        ret->host = xasprintf("%.*s", (int) (host_end - host), host);
        /* "01" and "1" are one port: compared as numbers would be, written without zeros. */
        ret->port =
                port ? xasprintf("%ld", strtol(port, NULL, 10)) : xstrdup(ret->tls ? "443" : "80");
        ret->authority = xasprintf("%.*s", (int) n, rest);
        const char *target = rest + n;
        ret->target =
                xasprintf("%s%.*s", *target == '/' ? "" : "/", (int) strcspn(target, "#"), target);
        return 0;
}

bool url_same_origin(const Url *a, const Url *b) {
        return a->tls == b->tls && strcasecmp(a->host, b->host) == 0 &&
               strcmp(a->port, b->port) == 0;
}

char *url_resolve(const Url *base, const char *location) {
        const char *scheme = base->tls ? "https" : "http";
        if (strncasecmp(location, "http://", 7) == 0 || strncasecmp(location, "https://", 8) == 0)
                return xstrdup(location);
        if (strncmp(location, "//", 2) == 0)
                return xasprintf("%s:%s", scheme, location);
        if (location[0] == '/')
                return xasprintf("%s://%s%s", scheme, base->authority, location);
        return NULL;
}

void url_list_done(UrlList *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i]);
        free(l->items);
        *l = (UrlList){};
}

/* Checks one item of a list and returns it as a base URL; NULL with *ret_error, which
 * names the item when it is one of several. */
static char *url_list_item(const char *item, size_t len, bool several, char **ret_error) {
        while (len > 0 && (item[0] == ' ' || item[0] == '\t'))
                item++, len--;
        while (len > 0 && (item[len - 1] == ' ' || item[len - 1] == '\t'))
                len--;
        if (len == 0) {
                *ret_error = xstrdup("an empty URL in the list");
                return NULL;
        }
        _cleanup_free_ char *url = xasprintf("%.*s", (int) len, item);
        Url u;
        _cleanup_free_ char *why = NULL;
        if (url_parse(url, &u, &why) < 0) {
                *ret_error = several ? xasprintf("%s: %s", url, why) : TAKE_PTR(why);
                return NULL;
        }
        url_done(&u);
        /* Request paths are appended to a base URL: a query or fragment would end up in
         * the middle of them. */
        if (strpbrk(url, "?#")) {
                *ret_error = xasprintf("%s%sa controller URL has no query or fragment",
                                       several ? url : "", several ? ": " : "");
                return NULL;
        }
        /* ... and start with '/': a trailing one would double it. */
        for (size_t n = strlen(url); n > 0 && url[n - 1] == '/'; n--)
                url[n - 1] = '\0';
        return TAKE_PTR(url);
}

int url_list_parse(const char *text, UrlList *ret, char **ret_error) {
        UrlList l = {};
        for (const char *p = text;; p++) {
                size_t len = strcspn(p, ",");
                if (l.n == URL_LIST_MAX) {
                        *ret_error = xasprintf("more than %d URLs", URL_LIST_MAX);
                        url_list_done(&l);
                        return -EINVAL;
                }
                char *item = url_list_item(p, len, strchr(text, ',') != NULL, ret_error);
                if (!item) {
                        url_list_done(&l);
                        return -EINVAL;
                }
                l.items = xrealloc(l.items, (l.n + 1) * sizeof(*l.items));
                l.items[l.n++] = item;
                p += len;
                if (!*p)
                        break;
        }
        *ret = l;
        return 0;
}

int url_list_find_origin(const UrlList *l, const char *url) {
        Url target;
        _cleanup_free_ char *unused = NULL;
        if (url_parse(url, &target, &unused) < 0)
                return -1;
        int found = -1;
        for (size_t i = 0; found < 0 && i < l->n; i++) {
                Url item;
                _cleanup_free_ char *why = NULL;
                if (url_parse(l->items[i], &item, &why) < 0)
                        continue;
                if (url_same_origin(&item, &target))
                        found = (int) i;
                url_done(&item);
        }
        url_done(&target);
        return found;
}

char *url_escape(const char *s) {
        /* RFC 3986: all but the unreserved characters as %XX. */
        static const char hex[] = "0123456789ABCDEF";
        char *e = xmalloc(3 * strlen(s) + 1), *p = e;
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    strchr("-._~", c)) {
                        *p++ = (char) c;
                } else {
                        *p++ = '%';
                        *p++ = hex[c >> 4];
                        *p++ = hex[c & 15];
                }
        }
        *p = '\0';
        return e;
}
