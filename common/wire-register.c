/* SPDX-License-Identifier: MIT */
/* The register request and its answer: encoder and strict decoder of each; see wire.h. */
#include "wire.h"

#include <arpa/inet.h>
#include "token.h"

#include <errno.h>
#include <string.h>

/* Absent optional strings and labels are left out, as the decoder reads them. */
bool wire_address_valid(const char *address) {
        const char *colon;
        if (address[0] == '[') {
                /* [IPv6]:port, the address as inet_pton reads it, without a zone. */
                const char *close = strchr(address, ']');
                char ip[INET6_ADDRSTRLEN];
                struct in6_addr unused;
                size_t n = close ? (size_t) (close - address - 1) : 0;
                if (!close || n == 0 || n >= sizeof(ip) || close[1] != ':')
                        return false;
                memcpy(ip, address + 1, n);
                ip[n] = '\0';
                if (inet_pton(AF_INET6, ip, &unused) != 1)
                        return false;
                colon = close + 1;
        } else {
                /* A host name or an IPv4 address: nothing a URL could read as a path,
                 * query, user or another port ('/', '?', '#', '@', ':'). */
                colon = strchr(address, ':');
                size_t n = colon ? (size_t) (colon - address) : 0;
                if (n == 0 || n > 253 || address[0] == '-' || address[0] == '.')
                        return false;
                for (const char *p = address; p < colon; p++)
                        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                              (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                                return false;
        }
        const char *port = colon + 1;
        size_t digits = strspn(port, "0123456789");
        if (digits == 0 || digits > 5 || port[digits] != '\0' || port[0] == '0')
                return false;
        long value = 0;
        for (size_t i = 0; i < digits; i++)
                value = value * 10 + (port[i] - '0');
        return value <= 65535;
}

json_t *wire_register_encode(const WireRegister *r) {
        return json_pack("{s:s, s:s*, s:s*, s:s*, s:s*, s:O*, s:{s:i, s:I, s:i, s:O*, s:s*}}",
                         "node", r->node, "hostname", r->hostname, "address", r->address, "boot_id",
                         r->boot_id, "agent_id", r->agent_id, "labels", r->labels, "inventory",
                         "cpus", r->cpus, "memory_mb", (json_int_t) r->memory_mb, "numa_nodes",
                         r->numa_nodes, "accelerators", r->accelerators, "containment",
                         r->containment);
}

int wire_register_parse(json_t *json, WireRegister *ret, JsonError *err) {
        static const char *const keys[] = {"node",     "hostname", "address",   "boot_id",
                                           "agent_id", "labels",   "inventory", NULL};
        static const char *const inv_keys[] = {"cpus",         "memory_mb",   "numa_nodes",
                                               "accelerators", "containment", NULL};
        WireRegister r = {0};
        int k;
        if (!json_is_object(json))
                return json_error_set(err, "", "must be a JSON object");
        if ((k = json_check_keys(json, "", keys, err)) < 0 ||
            (k = json_get_string(json, "node", "node", true, 128, &r.node, err)) < 0 ||
            (k = json_get_string(json, "hostname", "hostname", false, 256, &r.hostname, err)) < 0 ||
            (k = json_get_string(json, "address", "address", false, 300, &r.address, err)) < 0 ||
            (k = json_get_string(json, "boot_id", "boot_id", false, 128, &r.boot_id, err)) < 0 ||
            (k = json_get_string(json, "agent_id", "agent_id", false, 128, &r.agent_id, err)) < 0 ||
            (k = json_get_string_map(json, "labels", "labels", 64, 256, &r.labels, err)) < 0)
                return k;
        for (const char *p = r.node; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                        return json_error_set(err, "node",
                                              "may only contain letters, digits, '-', '_', '.'");
        /* The controller makes URLs of it (the log proxy): host and port, nothing else. */
        if (r.address && !wire_address_valid(r.address))
                return json_error_set(err, "address",
                                      "must be host:port (a host name, an IPv4 address or "
                                      "[an IPv6 address], and a port from 1 to 65535)");
        json_t *inv = json_object_get(json, "inventory");
        if (!json_is_object(inv))
                return json_error_set(err, "inventory", "must be an object");
        if ((k = json_check_keys(inv, "inventory.", inv_keys, err)) < 0)
                return k;
        int64_t v = 0;
        if ((k = json_get_int(inv, "cpus", "inventory.cpus", true, 0, 1 << 20, &v, err)) < 0)
                return k;
        r.cpus = (int) v;
        v = 0;
        if ((k = json_get_int(inv, "memory_mb", "inventory.memory_mb", false, 0, INT64_C(1) << 40,
                              &v, err)) < 0)
                return k;
        r.memory_mb = v;
        v = 0;
        if ((k = json_get_int(inv, "numa_nodes", "inventory.numa_nodes", false, 0, 4096, &v, err)) <
            0)
                return k;
        r.numa_nodes = (int) v;
        if ((k = json_get_string(inv, "containment", "inventory.containment", false, 64,
                                 &r.containment, err)) < 0)
                return k;
        json_t *acc = json_object_get(inv, "accelerators");
        if (acc && !json_is_array(acc))
                return json_error_set(err, "inventory.accelerators", "must be a list");
        if (acc && json_array_size(acc) > 1024)
                return json_error_set(err, "inventory.accelerators", "too many devices");
        size_t i;
        json_t *a;
        json_array_foreach(acc, i, a) {
                if (!json_is_object(a) || !json_is_string(json_object_get(a, "kind")))
                        return json_error_set(err, "inventory.accelerators",
                                              "entries must be objects with a kind");
        }
        r.inventory = inv;
        r.accelerators = acc;
        *ret = r;
        return 0;
}

json_t *wire_register_answer_encode(const WireRegisterAnswer *a) {
        return json_pack("{s:s,s:I,s:I,s:s*}", "node", a->node, "lease_ms",
                         (json_int_t) a->lease_ms, "sync_period_ms", (json_int_t) a->sync_period_ms,
                         "log_key", a->log_key);
}

int wire_register_answer_parse(json_t *json, WireRegisterAnswer *ret) {
        if (!json_is_object(json))
                return -EBADMSG;
        int64_t lease = json_int(json, "lease_ms", 0), period = json_int(json, "sync_period_ms", 0);
        *ret = (WireRegisterAnswer){
                .node = json_str(json, "node"),
                .lease_ms = lease > 0 ? lease : 0,
                .sync_period_ms = period > 0 ? period : 0,
                .log_key = token_hex_valid(json_str(json, "log_key")) ? json_str(json, "log_key")
                                                                      : NULL,
        };
        return 0;
}
