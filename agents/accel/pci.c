/* SPDX-License-Identifier: MIT */
/*
 * PCI detection shared by the accelerator backends: one walk over hwloc's PCI device
 * objects driven by a backend's table (see pci.h), plus the path, counter and
 * environment helpers the backends use. Debian's hwloc has no CUDA/NVML component, so
 * plain PCI IDs are the one source of truth that works for every vendor; the agent asks
 * hwloc to keep all I/O objects so bridges and switches are there to look at.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pci.h"
#include "util.h"

typedef struct PciCandidate {
        hwloc_obj_t obj;
        const AccelPciModel *model; /* NULL: unknown ID taken with the fallback kind */
} PciCandidate;

static bool pci_class_accepted(const AccelPciMatch *m, unsigned class_id) {
        if (m->n_classes == 0)
                return true;
        for (size_t i = 0; i < m->n_classes; i++)
                if (m->classes[i] == class_id)
                        return true;
        return false;
}

static const AccelPciModel *pci_model_find(const AccelPciMatch *m, unsigned device_id) {
        for (size_t i = 0; i < m->n_models; i++)
                if (m->models[i].device_id == device_id)
                        return &m->models[i];
        return NULL;
}

static int pci_candidate_compare(const void *a, const void *b) {
        const struct hwloc_pcidev_attr_s *x = &((const PciCandidate *) a)->obj->attr->pcidev;
        const struct hwloc_pcidev_attr_s *y = &((const PciCandidate *) b)->obj->attr->pcidev;

        if (x->domain != y->domain)
                return x->domain < y->domain ? -1 : 1;
        if (x->bus != y->bus)
                return x->bus < y->bus ? -1 : 1;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        if (x->func != y->func)
                return x->func < y->func ? -1 : 1;
        return 0;
}

int accel_pci_numa_node(hwloc_topology_t topo, hwloc_obj_t obj) {
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);

        if (!anc || !anc->nodeset || hwloc_bitmap_iszero(anc->nodeset))
                return -1;
        /*
         * A device hwloc could only attach to the whole machine has no known locality;
         * naming node 0 would send its ranks to the wrong socket half of the time.
         */
        if (anc == hwloc_get_root_obj(topo) && hwloc_bitmap_weight(anc->nodeset) > 1)
                return -1;
        return hwloc_bitmap_first(anc->nodeset);
}

static bool pci_is_pci_bridge(hwloc_obj_t obj) {
        return obj && obj->type == HWLOC_OBJ_BRIDGE &&
               obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

int accel_pci_switch_id(hwloc_obj_t obj) {
        hwloc_obj_t port = obj->parent; /* the downstream port the device hangs off */
        hwloc_obj_t upstream;

        if (!pci_is_pci_bridge(port))
                return -1;
        upstream = port->parent;
        /*
         * A root port's parent is the host bridge, whose upstream side is not PCI; only a
         * bridge that itself sits below a PCI bridge is the upstream port of a switch.
         */
        if (!pci_is_pci_bridge(upstream) || !pci_is_pci_bridge(upstream->parent))
                return -1;
        const struct hwloc_pcidev_attr_s *p = &upstream->attr->bridge.upstream.pci;
        return (int) (((p->domain & 0x7fffu) << 16) | ((unsigned) p->bus << 8) |
                      ((unsigned) (p->dev & 0x1f) << 3) | (p->func & 0x7));
}

static void pci_device_fill(hwloc_topology_t topo, const AccelBackend *backend,
                            const AccelPciMatch *m, const PciCandidate *c, int vendor_index,
                            AccelDevice *dev) {
        const struct hwloc_pcidev_attr_s *p = &c->obj->attr->pcidev;

        memset(dev, 0, sizeof(*dev));
        dev->backend = backend;
        if (c->model) {
                snprintf(dev->kind, sizeof(dev->kind), "%s", c->model->kind);
                snprintf(dev->model, sizeof(dev->model), "%s", c->model->model);
                dev->cores = c->model->cores;
        } else {
                snprintf(dev->kind, sizeof(dev->kind), "%s", m->fallback_kind);
                snprintf(dev->model, sizeof(dev->model), "PCI device %04x:%04x",
                         (unsigned) p->vendor_id, (unsigned) p->device_id);
        }
        dev->index = -1;
        dev->vendor_index = vendor_index;
        snprintf(dev->pci_bus_id, sizeof(dev->pci_bus_id), "%04x:%02x:%02x.%x",
                 (unsigned) p->domain & 0xffffu, (unsigned) p->bus, (unsigned) p->dev,
                 (unsigned) p->func);
        dev->numa_node = accel_pci_numa_node(topo, c->obj);
        dev->pcie_switch = accel_pci_switch_id(c->obj);
}

int accel_pci_detect(hwloc_topology_t topo, const AccelConfig *cfg, const AccelBackend *backend,
                     const AccelPciMatch *m, AccelDevice **devs, size_t *n_devs) {
        static const AccelConfig real_root = {0};
        _cleanup_free_ PciCandidate *cand = NULL;
        size_t n_cand = 0, cap = 0;

        if (!cfg)
                cfg = &real_root;

        for (hwloc_obj_t obj = hwloc_get_next_pcidev(topo, NULL); obj;
             obj = hwloc_get_next_pcidev(topo, obj)) {
                const struct hwloc_pcidev_attr_s *p = &obj->attr->pcidev;
                const AccelPciModel *model;

                if (p->vendor_id != m->vendor_id || !pci_class_accepted(m, p->class_id))
                        continue;
                model = pci_model_find(m, p->device_id);
                if (!model && !m->fallback_kind)
                        continue;
                if (n_cand == cap) {
                        size_t ncap = cap ? cap * 2 : 16;
                        PciCandidate *t = realloc(cand, ncap * sizeof(*t));
                        if (!t)
                                return -ENOMEM;
                        cand = t;
                        cap = ncap;
                }
                cand[n_cand++] = (PciCandidate){.obj = obj, .model = model};
        }
        if (n_cand == 0)
                return 0;

        /* hwloc lists devices in tree order; the drivers number them in bus order. */
        qsort(cand, n_cand, sizeof(*cand), pci_candidate_compare);

        AccelDevice *out = realloc(*devs, (*n_devs + n_cand) * sizeof(*out));
        if (!out)
                return -ENOMEM;
        *devs = out;
        int present = 0;
        for (size_t i = 0; i < n_cand; i++) {
                AccelDevice *dev = &out[*n_devs];
                char path[sizeof(dev->dev_path)];

                /* The driver names nodes by the position among all of its devices... */
                pci_device_fill(topo, backend, m, &cand[i], (int) i, dev);
                /* ...and a device without its node is not usable by ranks: leave it out. */
                if (!m->node_find(dev, cfg, path, sizeof(path)))
                        continue;
                snprintf(dev->dev_path, sizeof(dev->dev_path), "%s", path);
                /*
                 * Runtimes number the devices they can open, so a container given nodes 2
                 * and 3 calls them 0 and 1: vendor_index counts usable devices only, as
                 * registry.c's accel_detect_all() numbers them too.
                 */
                dev->vendor_index = present++;
                (*n_devs)++;
        }
        return 0;
}

bool accel_path_join(char *buf, size_t size, const char *root, const char *path) {
        int r = snprintf(buf, size, "%s%s", root ? root : "", path);
        return r >= 0 && (size_t) r < size;
}

bool accel_path_exists(const char *root, const char *path) {
        char buf[PATH_MAX];
        struct stat st;

        if (!accel_path_join(buf, sizeof(buf), root, path))
                return false;
        return stat(buf, &st) == 0;
}

int accel_read_counter(const char *root, const char *path, unsigned long long *ret_value) {
        _cleanup_free_ char *full = xasprintf("%s%s", root ? root : "", path);
        _cleanup_free_ char *data = NULL;
        unsigned long long v;
        char *end;
        int r;

        r = util_read_file(full, &data, NULL);
        if (r < 0)
                return r;
        errno = 0;
        v = strtoull(data, &end, 10);
        if (errno != 0 || end == data || data[0] == '-')
                return -EINVAL;
        while (*end == '\n' || *end == ' ' || *end == '\t')
                end++;
        if (*end != '\0')
                return -EINVAL;
        *ret_value = v;
        return 0;
}

static int accel_device_compare_vendor_index(const void *a, const void *b) {
        const AccelDevice *x = *(const AccelDevice *const *) a;
        const AccelDevice *y = *(const AccelDevice *const *) b;

        return (x->vendor_index > y->vendor_index) - (x->vendor_index < y->vendor_index);
}

const AccelDevice **accel_devices_sort(const AccelDevice *const *devs, size_t n) {
        const AccelDevice **sorted = xcalloc(n ? n : 1, sizeof(*sorted));

        if (n > 0) {
                memcpy(sorted, devs, n * sizeof(*sorted));
                qsort(sorted, n, sizeof(*sorted), accel_device_compare_vendor_index);
        }
        return sorted;
}

void accel_str_append(char **s, const char *sep, const char *fmt, ...) {
        _cleanup_free_ char *piece = NULL;
        va_list ap;
        char *t;

        va_start(ap, fmt);
        if (vasprintf(&piece, fmt, ap) < 0)
                abort();
        va_end(ap);
        t = xasprintf("%s%s%s", *s ? *s : "", *s && **s ? sep : "", piece);
        free(*s);
        *s = t;
}

const char *accel_env_get(const json_t *env, const char *key) {
        const char *s = json_string_value(json_object_get(env, key));
        return s && *s ? s : NULL;
}

long accel_env_get_long(const json_t *env, const char *key, long def) {
        const char *s = accel_env_get(env, key);
        char *end;
        long v;

        if (!s)
                return def;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < 0)
                return def;
        return v;
}

int accel_env_set(json_t *env, const char *key, const char *value) {
        json_t *s = json_string(value);

        if (!s || json_object_set_new(env, key, s) < 0)
                return -ENOMEM;
        return 0;
}
