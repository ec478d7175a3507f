/* SPDX-License-Identifier: MIT */
/* Error answers (docs/PROTOCOL.md, conventions); see wire.h. */
#include "wire.h"

json_t *wire_error_encode(const WireError *e) {
        json_t *o = json_pack("{s:s,s:s}", "code", e->code ? e->code : "internal", "message",
                              e->message ? e->message : "");
        if (e->field && *e->field)
                json_object_set_new(o, "field", json_string(e->field));
        return json_pack("{s:o}", "error", o);
}

void wire_error_parse(json_t *json, WireError *ret) {
        json_t *e = json_object_get(json, "error");
        *ret = (WireError){
                .code = json_string_value(json_object_get(e, "code")),
                .message = json_string_value(json_object_get(e, "message")),
                .field = json_string_value(json_object_get(e, "field")),
        };
}
