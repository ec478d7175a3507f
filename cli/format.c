/* SPDX-License-Identifier: MIT */
/*
 * What axctl prints for people: ages ("12s", "3m", "2h"), RFC 3339 parsing, aligned
 * tables and JSON cells. Tables are plain text with two spaces between columns and a
 * header line in capitals; empty cells print as "-" so that every row splits into the
 * same number of words in the common case (`awk '{print $1}'` keeps working). Scripts
 * that need every field should use --json, which prints the API's JSON unchanged.
 */
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <time.h>

char *cli_format_age(int64_t seconds, char *buf, size_t size) {
        if (seconds < 0)
                seconds = 0;
        if (seconds < 60)
                snprintf(buf, size, "%llds", (long long) seconds);
        else if (seconds < 3600)
                snprintf(buf, size, "%lldm", (long long) (seconds / 60));
        else if (seconds < 86400)
                snprintf(buf, size, "%lldh", (long long) (seconds / 3600));
        else
                snprintf(buf, size, "%lldd", (long long) (seconds / 86400));
        return buf;
}

static int parse_digits(const char **p, int n, int *ret) {
        int v = 0;
        for (int i = 0; i < n; i++) {
                if ((*p)[i] < '0' || (*p)[i] > '9')
                        return -EINVAL;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

static int expect_char(const char **p, const char *allowed) {
        if (**p == '\0' || !strchr(allowed, **p))
                return -EINVAL;
        (*p)++;
        return 0;
}

int cli_parse_time(const char *s, int64_t *ret_ms) {
        if (!s)
                return -EINVAL;
        const char *p = s;
        int year, mon, day, hour, min, sec, ms = 0;
        if (parse_digits(&p, 4, &year) < 0 || expect_char(&p, "-") < 0 ||
            parse_digits(&p, 2, &mon) < 0 || expect_char(&p, "-") < 0 ||
            parse_digits(&p, 2, &day) < 0 || expect_char(&p, "Tt ") < 0 ||
            parse_digits(&p, 2, &hour) < 0 || expect_char(&p, ":") < 0 ||
            parse_digits(&p, 2, &min) < 0 || expect_char(&p, ":") < 0 ||
            parse_digits(&p, 2, &sec) < 0)
                return -EINVAL;
        if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
                return -EINVAL;
        if (*p == '.') {
                p++;
                int digits = 0;
                while (*p >= '0' && *p <= '9') {
                        /* Keep milliseconds; finer digits do not matter for ages. */
                        if (digits < 3)
                                ms = ms * 10 + (*p - '0');
                        digits++;
                        p++;
                }
                if (digits == 0)
                        return -EINVAL;
                for (; digits < 3; digits++)
                        ms *= 10;
        }
        int offset_min = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int sign = *p == '-' ? -1 : 1, oh, om;
                p++;
                if (parse_digits(&p, 2, &oh) < 0 || expect_char(&p, ":") < 0 ||
                    parse_digits(&p, 2, &om) < 0)
                        return -EINVAL;
                offset_min = sign * (oh * 60 + om);
        } else {
                return -EINVAL;
        }
        if (*p != '\0')
                return -EINVAL;

        struct tm tm = {
                .tm_year = year - 1900,
                .tm_mon = mon - 1,
                .tm_mday = day,
                .tm_hour = hour,
                .tm_min = min,
                .tm_sec = sec,
        };
        time_t t = timegm(&tm);
        *ret_ms = ((int64_t) t - (int64_t) offset_min * 60) * 1000 + ms;
        return 0;
}

char *cli_format_age_since(const char *s, int64_t now_ms, char *buf, size_t size) {
        int64_t t;
        if (!s || cli_parse_time(s, &t) < 0) {
                snprintf(buf, size, "-");
                return buf;
        }
        return cli_format_age((now_ms - t) / 1000, buf, size);
}

struct CliTable {
        size_t n_columns;
        char **headers;
        size_t *widths;
        char **cells; /* n_rows * n_columns, row-major */
        size_t n_rows;
        size_t cap_rows;
        size_t printed_rows;
        bool header_printed;
};

CliTable *cli_table_new(size_t n_columns, const char *const *headers) {
        CliTable *t = xcalloc(1, sizeof(*t));
        t->n_columns = n_columns;
        t->headers = xcalloc(n_columns, sizeof(char *));
        t->widths = xcalloc(n_columns, sizeof(size_t));
        for (size_t i = 0; i < n_columns; i++) {
                t->headers[i] = xstrdup(headers[i]);
                t->widths[i] = strlen(headers[i]);
        }
        return t;
}

CliTable *cli_table_free(CliTable *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_columns; i++)
                free(t->headers[i]);
        for (size_t i = 0; i < t->n_rows * t->n_columns; i++)
                free(t->cells[i]);
        free(t->headers);
        free(t->widths);
        free(t->cells);
        free(t);
        return NULL;
}

void cli_table_add_row(CliTable *t, const char *const *cells) {
        if (t->n_rows == t->cap_rows) {
                t->cap_rows = t->cap_rows ? t->cap_rows * 2 : 16;
                t->cells = xrealloc(t->cells, t->cap_rows * t->n_columns * sizeof(char *));
        }
        char **row = t->cells + t->n_rows * t->n_columns;
        for (size_t i = 0; i < t->n_columns; i++) {
                const char *c = cells[i] && cells[i][0] ? cells[i] : "-";
                row[i] = xstrdup(c);
                /* Cells are single-line: a newline in a reason would break the table. */
                for (char *p = row[i]; *p; p++)
                        if (*p == '\n' || *p == '\r' || *p == '\t')
                                *p = ' ';
        }
        t->n_rows++;
}

static void table_print_line(const CliTable *t, char *const *cells, FILE *f) {
        for (size_t i = 0; i < t->n_columns; i++) {
                bool last = i + 1 == t->n_columns;
                if (last)
                        fprintf(f, "%s\n", cells[i]);
                else
                        fprintf(f, "%-*s  ", (int) t->widths[i], cells[i]);
        }
}

void cli_table_print(CliTable *t, FILE *f) {
        for (size_t r = t->printed_rows; r < t->n_rows; r++)
                for (size_t i = 0; i < t->n_columns; i++) {
                        size_t n = strlen(t->cells[r * t->n_columns + i]);
                        if (n > t->widths[i])
                                t->widths[i] = n;
                }
        if (!t->header_printed) {
                table_print_line(t, t->headers, f);
                t->header_printed = true;
        }
        for (size_t r = t->printed_rows; r < t->n_rows; r++)
                table_print_line(t, t->cells + r * t->n_columns, f);
        t->printed_rows = t->n_rows;
        fflush(f);
}

char *cli_json_cell(const json_t *v) {
        if (!v || json_is_null(v))
                return xstrdup("-");
        if (json_is_string(v))
                return xstrdup(json_string_value(v));
        if (json_is_integer(v))
                return xasprintf("%lld", (long long) json_integer_value(v));
        if (json_is_real(v))
                return xasprintf("%g", json_real_value(v));
        if (json_is_boolean(v))
                return xstrdup(json_is_true(v) ? "true" : "false");
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        return s ? s : xstrdup("-");
}

typedef struct Escaper {
        FILE *to;
        bool keep_cr;
        bool after_c2; /* the last byte was 0xc2, the lead byte of U+0080-U+00BF */
} Escaper;

/* Escapes into a buffer first: `to` may be unbuffered (stderr), where every fputc
 * would be a system call of its own. */
static ssize_t escaper_write(void *cookie, const char *buf, size_t size) {
        Escaper *e = cookie;
        char out[4096];
        size_t n = 0;
        for (size_t i = 0; i < size; i++) {
                if (n > sizeof(out) - 16) {
                        fwrite(out, 1, n, e->to);
                        n = 0;
                }
                unsigned char c = (unsigned char) buf[i];
                if (e->after_c2) {
                        e->after_c2 = false;
                        if (c >= 0x80 && c <= 0x9f) {
                                n += (size_t) snprintf(out + n, sizeof(out) - n, "\\u%04x", c);
                                continue;
                        }
                        out[n++] = (char) 0xc2;
                }
                if (c == 0xc2)
                        e->after_c2 = true;
                else if ((c < 0x20 && c != '\n' && c != '\t' && !(c == '\r' && e->keep_cr)) ||
                         c == 0x7f)
                        n += (size_t) snprintf(out + n, sizeof(out) - n, "\\x%02x", c);
                else
                        out[n++] = (char) c;
        }
        fwrite(out, 1, n, e->to);
        fflush(e->to);
        return (ssize_t) size;
}

static int escaper_close(void *cookie) {
        Escaper *e = cookie;
        if (e->after_c2)
                fputc(0xc2, e->to);
        fflush(e->to);
        free(e);
        return 0;
}

FILE *cli_escaping_stream(FILE *to, bool keep_cr) {
        Escaper *e = xcalloc(1, sizeof(*e));
        *e = (Escaper){.to = to, .keep_cr = keep_cr};
        FILE *f = fopencookie(
                e, "w", (cookie_io_functions_t){.write = escaper_write, .close = escaper_close});
        if (!f) {
                free(e);
                return NULL;
        }
        setvbuf(f, NULL, _IOLBF, 0);
        return f;
}

/* ASCII only: a C1 control in a string is written as \u0080-\u009f, which the escaping
 * stream leaves alone and every JSON reader decodes to the same string. */
void cli_json_print(FILE *f, const json_t *v) {
        json_dumpf(v, f, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
        fputc('\n', f);
        fflush(f);
}

char *cli_job_state_line(const json_t *job) {
        const char *state = json_string_value(json_object_get(job, "state"));
        const char *reason = json_string_value(json_object_get(job, "reason"));
        json_t *exit_code = json_object_get(job, "exit_code");

        _cleanup_free_ char *tail = NULL;
        if (json_is_integer(exit_code))
                tail = xasprintf(" (exit code %lld)", (long long) json_integer_value(exit_code));
        return xasprintf("%s%s%s%s", state ? state : "unknown", reason && *reason ? ": " : "",
                         reason && *reason ? reason : "", tail ? tail : "");
}
