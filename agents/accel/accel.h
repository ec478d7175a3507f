/* SPDX-License-Identifier: MIT */
/*
 * The accelerator backend interface. Each vendor is one file in this folder that
 * defines one AccelBackend and adds one line to the table in registry.c; nothing else
 * in the tree names a vendor. A backend finds its devices in the node's hwloc topology
 * (PCI objects) and under the device root, turns a rank's devices into the vendor's
 * visibility environment, and probes device health.
 */
#pragma once

#include <hwloc.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct AccelBackend AccelBackend;

/* What a backend is told about the node when it looks for devices. */
typedef struct AccelConfig {
        const char *dev_root; /* prefix for /dev paths ("" for the real root) */
        const char *sys_root; /* prefix for /sys paths ("" for the real root) */
        const char *nvml_library; /* NULL: "libnvidia-ml.so.1" */
} AccelConfig;

/* One device found on the node. `index` is its place in the node inventory. */
typedef struct AccelDevice {
        const AccelBackend *backend;
        char kind[32]; /* what users request: "nvidia-h100", "tpu-v5p", "trn2" */
        char model[64]; /* "H100 SXM5 80GB" */
        int index; /* position in the node's inventory list, set by the caller */
        int vendor_index; /* position among devices of this backend in PCI bus order */
        char pci_bus_id[16]; /* "0000:18:00.0" */
        int numa_node; /* -1 when unknown */
        int pcie_switch; /* id of the closest upstream PCI bridge shared by siblings, -1 none */
        char uuid[80];
        char dev_path[256]; /* device node checked at detection, "" when none */
        unsigned cores; /* NeuronCores and the like per device; 0 when not meaningful */
} AccelDevice;

struct AccelBackend {
        const char *name; /* "nvidia" */
        /*
         * Appends the devices of this vendor found in topo to *devs (growing it with
         * realloc, *n_devs updated). Returns 0 (also when none are found) or -errno.
         */
        int (*detect)(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **devs,
                      size_t *n_devs);
        /*
         * Adds the visibility environment for one rank holding devs[0..n-1] (all of this
         * backend) to env, a JSON object of strings that already holds the rank's AXCTL_*
         * variables (AXCTL_RANK, AXCTL_LOCAL_RANK, AXCTL_NODE_RANK, AXCTL_NUM_NODES,
         * AXCTL_NODE_HOSTNAMES, AXCTL_COORDINATOR, ...). Returns 0 or -errno.
         */
        int (*devices_env)(const AccelDevice *const *devs, size_t n, json_t *env);
        /*
         * Probes the health of this backend's devices. Returns 0 when healthy, 1 when
         * unhealthy with *ret_reason (malloc'd, names the device and why), -errno when
         * the probe itself failed. May be NULL.
         */
        int (*health)(const AccelDevice *devs, size_t n, const AccelConfig *cfg, char **ret_reason);
};

/* NULL-terminated table of all backends, in registry.c. */
extern const AccelBackend *const accel_backends[];

/* Runs every backend's detect over topo; devices get their inventory index. */
int accel_detect_all(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **ret_devs,
                     size_t *ret_n);

/*
 * Launch profiles: data files "<profile_dir>/<kind>.env" (KEY=VALUE lines, '#' comments)
 * with tuning variables for one accelerator kind (XLA_FLAGS, NCCL_*, ...). Applies the
 * profile of `kind` to env, setting only keys env does not already hold, so a job's own
 * env always wins. A missing profile file is not an error. Returns 0 or -errno.
 */
int accel_profile_apply(const char *profile_dir, const char *kind, json_t *env);
