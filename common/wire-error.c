/* SPDX-License-Identifier: MIT */
/* Decoding of error answers (docs/PROTOCOL.md, conventions); see wire.h. */
#include "wire.h"

void wire_error_parse(json_t *json, WireError *ret) {
        json_t *e = json_object_get(json, "error");
        *ret = (WireError){
                .code = json_string_value(json_object_get(e, "code")),
                .message = json_string_value(json_object_get(e, "message")),
                .field = json_string_value(json_object_get(e, "field")),
        };
}
