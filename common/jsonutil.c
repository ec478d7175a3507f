/* SPDX-License-Identifier: MIT */
/* Typed, range-checked readers for JSON objects; see jsonutil.h. */
#include "jsonutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int json_error_set(JsonError *err, const char *field, const char *fmt, ...) {
        if (!err)
                return -EINVAL;
        snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

int json_check_keys(json_t *obj, const char *prefix, const char *const *allowed, JsonError *err) {
        const char *key;
        json_t *value;
        json_object_foreach(obj, key, value) {
                bool known = false;
                for (const char *const *a = allowed; *a; a++)
                        if (strcmp(*a, key) == 0) {
                                known = true;
                                break;
                        }
                if (!known) {
                        char field[128];
                        snprintf(field, sizeof(field), "%s%.100s", prefix, key);
                        return json_error_set(err, field, "unknown field");
                }
        }
        return 0;
}

int json_get_int(json_t *obj, const char *key, const char *field, bool required, int64_t min,
                 int64_t max, int64_t *ret, JsonError *err) {
        json_t *v = json_object_get(obj, key);
        if (!v || json_is_null(v)) {
                if (required)
                        return json_error_set(err, field, "is required");
                return 0;
        }
        if (!json_is_integer(v))
                return json_error_set(err, field, "must be an integer");
        json_int_t i = json_integer_value(v);
        if (i < min || i > max)
                return json_error_set(err, field, "must be between %lld and %lld", (long long) min,
                                      (long long) max);
        *ret = i;
        return 0;
}

int json_get_string(json_t *obj, const char *key, const char *field, bool required, size_t max_len,
                    const char **ret, JsonError *err) {
        json_t *v = json_object_get(obj, key);
        if (!v || json_is_null(v)) {
                if (required)
                        return json_error_set(err, field, "is required");
                return 0;
        }
        if (!json_is_string(v))
                return json_error_set(err, field, "must be a string");
        size_t len = json_string_length(v);
        if (len == 0)
                return json_error_set(err, field, "must not be empty");
        if (len > max_len)
                return json_error_set(err, field, "must be at most %zu bytes", max_len);
        if (strlen(json_string_value(v)) != len)
                return json_error_set(err, field, "must not contain NUL bytes");
        *ret = json_string_value(v);
        return 0;
}

int json_get_bool(json_t *obj, const char *key, const char *field, bool *ret, JsonError *err) {
        json_t *v = json_object_get(obj, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v))
                return json_error_set(err, field, "must be true or false");
        *ret = json_is_true(v);
        return 0;
}

int json_get_string_map(json_t *obj, const char *key, const char *field, size_t max_keys,
                        size_t max_len, json_t **ret, JsonError *err) {
        json_t *v = json_object_get(obj, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return json_error_set(err, field, "must be an object of strings");
        if (json_object_size(v) > max_keys)
                return json_error_set(err, field, "must have at most %zu entries", max_keys);
        const char *k;
        json_t *value;
        json_object_foreach(v, k, value) {
                char sub[128];
                snprintf(sub, sizeof(sub), "%s.%.80s", field, k);
                if (k[0] == '\0' || strlen(k) > 256)
                        return json_error_set(err, field, "keys must be 1 to 256 bytes");
                if (!json_is_string(value))
                        return json_error_set(err, sub, "must be a string");
                if (json_string_length(value) > max_len)
                        return json_error_set(err, sub, "must be at most %zu bytes", max_len);
                if (strlen(json_string_value(value)) != json_string_length(value))
                        return json_error_set(err, sub, "must not contain NUL bytes");
        }
        *ret = v;
        return 0;
}

const char *json_str(json_t *obj, const char *key) {
        return json_string_value(json_object_get(obj, key));
}

int64_t json_int(json_t *obj, const char *key, int64_t def) {
        json_t *v = json_object_get(obj, key);
        return json_is_integer(v) ? (int64_t) json_integer_value(v) : def;
}
