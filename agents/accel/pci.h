/* SPDX-License-Identifier: MIT */
/*
 * PCI helpers shared by the accelerator backends. A backend describes its hardware as
 * data (a PCI vendor, a table of device IDs with the kind users request, the PCI
 * classes that count, and how its device node is named) and accel_pci_detect() does
 * the rest: it walks hwloc's PCI objects, sorts the matches in PCI bus order, fills in
 * NUMA node and PCIe switch, and keeps only the devices whose node exists. The small
 * string and file helpers here are what the backends' env and health code share.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel.h"
#include "util.h"

/* One known device ID of a vendor. */
typedef struct AccelPciModel {
        uint16_t device_id;
        const char *kind; /* "nvidia-h100" */
        const char *model; /* "H100 SXM5 80GB" */
        unsigned cores; /* NeuronCores per device and the like, 0 when not meaningful */
} AccelPciModel;

/* How a backend recognises its devices among the PCI objects of a topology. */
typedef struct AccelPciMatch {
        uint16_t vendor_id;
        const AccelPciModel *models;
        size_t n_models;
        /* Accepted PCI class IDs (class << 8 | subclass); n_classes 0 accepts any. */
        const uint16_t *classes;
        size_t n_classes;
        /*
         * Kind given to a device of this vendor and an accepted class whose device ID is
         * not in the table, or NULL to ignore such devices. Unknown devices still take a
         * vendor_index when a kind is given, so the numbering matches the driver's.
         */
        const char *fallback_kind;
        /*
         * Writes the path of the device node of dev into buf and returns true when it
         * exists; cfg->dev_root is the path prefix. While node_find runs, vendor_index
         * holds the device's position among all matching devices in PCI bus order (the
         * driver's numbering); afterwards it is renumbered over the devices kept.
         */
        bool (*node_find)(const AccelDevice *dev, const AccelConfig *cfg, char *buf, size_t size);
} AccelPciMatch;

/*
 * Appends the devices matching m found in topo to *devs (count in *n_devs), all attributed to
 * backend. Devices whose node_find fails are left out. Returns 0 or -errno.
 */
int accel_pci_detect(hwloc_topology_t topo, const AccelConfig *cfg, const AccelBackend *backend,
                     const AccelPciMatch *m, AccelDevice **devs, size_t *n_devs);

/* NUMA node (OS index) nearest to a PCI object, -1 when unknown. */
int accel_pci_numa_node(hwloc_topology_t topo, hwloc_obj_t obj);
/*
 * Identifies the PCIe switch above a PCI object: the switch's upstream port (the bridge
 * above the device's downstream port, when that bridge is itself below a PCI bridge),
 * as (domain << 16 | bus << 8 | device << 3 | function) with the domain folded to 15
 * bits. Returns -1 when the device hangs off a root port directly.
 */
int accel_pci_switch_id(hwloc_obj_t obj);

/* "<root><path>" into buf; true when it fits. root NULL means "". */
bool accel_path_join(char *buf, size_t size, const char *root, const char *path);
/* True when "<root><path>" exists (any file type). */
bool accel_path_exists(const char *root, const char *path);
/*
 * Reads an unsigned decimal counter from "<root><path>". Returns 0 with *ret_value, or
 * -ENOENT when the file is absent, -EINVAL when it holds no number, other -errno.
 */
int accel_read_counter(const char *root, const char *path, unsigned long long *ret_value);

/* A copy of devs[0..n-1] ordered by vendor_index, i.e. PCI bus order; free() it. */
const AccelDevice **accel_devices_sort(const AccelDevice *const *devs, size_t n);

/*
 * Appends a formatted piece to the malloc'd string *s (NULL counts as empty), with sep
 * in between when *s already holds something. Aborts on out-of-memory like xasprintf.
 */
void accel_str_append(char **s, const char *sep, const char *fmt, ...) _printf_(3, 4);

/* Returns the string value of key in env (a JSON object of strings), NULL when unset. */
const char *accel_env_get(const json_t *env, const char *key);
/* Returns the value of key in env as a non-negative int, or def when unset or invalid. */
long accel_env_get_long(const json_t *env, const char *key, long def);
/* Sets key to a copy of value in env; 0 or -ENOMEM. */
int accel_env_set(json_t *env, const char *key, const char *value);
