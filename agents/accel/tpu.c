/* SPDX-License-Identifier: MIT */
/*
 * The Google TPU backend. Chips are PCI vendor 0x1ae0 with the device IDs JAX's
 * hardware_utils.py lists (the same vendor also makes gVNIC and other virtual devices,
 * so only known IDs count). v4 and v5p hosts expose each chip as /dev/accel<N>; v5e
 * and v6e hosts hand chips to user space through VFIO as /dev/vfio/<IOMMU group>.
 * Ranks see their chips through the environment libtpu reads on Cloud TPU VMs and GKE:
 * TPU_VISIBLE_CHIPS, the chip and process bounds, the worker id and host list, and
 * for several processes per host the process addresses as torch_xla sets them.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel.h"
#include "pci.h"
#include "util.h"

extern const AccelBackend accel_backend_tpu;

/*
 * Device IDs from JAX's jax/_src/hardware_utils.py (_TPU_PCI_DEVICE_IDS); the same IDs
 * are in torch_xla's runtime detection. libtpu does not publish a table of its own.
 */
static const AccelPciModel tpu_models[] = {
        {0x005e, "tpu-v4", "TPU v4", 0},
        {0x0062, "tpu-v5p", "TPU v5p", 0},
        {0x0063, "tpu-v5e", "TPU v5e", 0},
        {0x006f, "tpu-v6e", "TPU v6e (Trillium)", 0},
};

/* First port of the per-process TPU runtime endpoints, torch_xla's default. */
#define TPU_PROCESS_BASE_PORT 8476

/* Reads the IOMMU group of a PCI device from sysfs; -1 when sysfs does not say. */
static long tpu_iommu_group(const AccelDevice *dev, const AccelConfig *cfg) {
        char link[PATH_MAX], target[PATH_MAX];
        char path[96];
        const char *base;
        ssize_t len;
        char *end;
        long group;

        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group", dev->pci_bus_id);
        if (!accel_path_join(link, sizeof(link), cfg->sys_root, path))
                return -1;
        len = readlink(link, target, sizeof(target) - 1);
        if (len < 0)
                return -1;
        target[len] = '\0';
        base = strrchr(target, '/');
        base = base ? base + 1 : target;
        errno = 0;
        group = strtol(base, &end, 10);
        if (errno != 0 || end == base || *end != '\0' || group < 0)
                return -1;
        return group;
}

static bool tpu_node_find(const AccelDevice *dev, const AccelConfig *cfg, char *buf, size_t size) {
        char path[48];
        long group;

        snprintf(path, sizeof(path), "/dev/accel%d", dev->vendor_index);
        if (accel_path_exists(cfg->dev_root, path))
                return accel_path_join(buf, size, cfg->dev_root, path);

        /*
         * VFIO hosts: the node is named after the chip's IOMMU group. Without sysfs to
         * ask, assume the groups follow chip order, as they do on TPU VMs where every
         * chip sits in its own group.
         */
        group = tpu_iommu_group(dev, cfg);
        snprintf(path, sizeof(path), "/dev/vfio/%ld", group >= 0 ? group : dev->vendor_index);
        if (accel_path_exists(cfg->dev_root, path))
                return accel_path_join(buf, size, cfg->dev_root, path);
        return false;
}

static const AccelPciMatch tpu_match = {
        .vendor_id = 0x1ae0,
        .models = tpu_models,
        .n_models = ELEMENTSOF(tpu_models),
        .fallback_kind = NULL,
        .node_find = tpu_node_find,
};

static int tpu_detect(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **devs,
                      size_t *n_devs) {
        return accel_pci_detect(topo, cfg, &accel_backend_tpu, &tpu_match, devs, n_devs);
}

/*
 * The shape of n chips as libtpu expects it for one process: a host's 4 chips are a
 * 2x2 block, 8 (v5e/v6e hosts) a 2x4 block; other counts are laid out in a line.
 */
static void tpu_chip_bounds(size_t n, char *buf, size_t size) {
        switch (n) {
        case 0:
        case 1:
                snprintf(buf, size, "1,1,1");
                break;
        case 4:
                snprintf(buf, size, "2,2,1");
                break;
        case 8:
                snprintf(buf, size, "2,4,1");
                break;
        default:
                snprintf(buf, size, "%zu,1,1", n);
                break;
        }
}

/* Sets key unless the job's env already chose a value (topology the job knows better). */
static int tpu_env_default(json_t *env, const char *key, const char *value) {
        if (accel_env_get(env, key))
                return 0;
        return accel_env_set(env, key, value);
}

/* TPU_PROCESS_ADDRESSES: every host's per-process endpoints, host-major. */
static char *tpu_process_addresses(const char *hostnames, long local_world) {
        _cleanup_free_ char *hosts = xstrdup(hostnames);
        char *list = NULL, *save = NULL;

        for (char *h = strtok_r(hosts, ",", &save); h; h = strtok_r(NULL, ",", &save))
                for (long l = 0; l < local_world; l++)
                        accel_str_append(&list, ",", "%s:%ld", h, TPU_PROCESS_BASE_PORT + l);
        return list;
}

static int tpu_devices_env(const AccelDevice *const *devs, size_t n, json_t *env) {
        _cleanup_free_ const AccelDevice **sorted = accel_devices_sort(devs, n);
        _cleanup_free_ char *chips = xstrdup("");
        const char *hostnames = accel_env_get(env, "AXCTL_NODE_HOSTNAMES");
        long num_nodes = accel_env_get_long(env, "AXCTL_NUM_NODES", 1);
        long local_world = accel_env_get_long(env, "AXCTL_LOCAL_WORLD_SIZE", 1);
        long world = accel_env_get_long(env, "AXCTL_WORLD_SIZE", num_nodes * local_world);
        long local_rank = accel_env_get_long(env, "AXCTL_LOCAL_RANK", 0);
        char buf[64];
        int r;

        for (size_t i = 0; i < n; i++)
                accel_str_append(&chips, ",", "%d", sorted[i]->vendor_index);
        r = accel_env_set(env, "TPU_VISIBLE_CHIPS", chips);
        if (r < 0)
                return r;

        tpu_chip_bounds(n, buf, sizeof(buf));
        r = tpu_env_default(env, "TPU_CHIPS_PER_PROCESS_BOUNDS", buf);
        if (r < 0)
                return r;
        /*
         * Processes laid out in a line: right for one host, for one process per host of
         * a 3D slice (v4, v5p: hosts stack along z) and for processes sharing a host. A
         * multi-host 2D slice (v5e, v6e) needs its own bounds in the job's env.
         */
        snprintf(buf, sizeof(buf), "1,1,%ld", world > 0 ? world : 1);
        r = tpu_env_default(env, "TPU_PROCESS_BOUNDS", buf);
        if (r < 0)
                return r;

        /* As on GKE: the worker is the host, numbered like the job's nodes. */
        snprintf(buf, sizeof(buf), "%ld", accel_env_get_long(env, "AXCTL_NODE_RANK", 0));
        r = accel_env_set(env, "TPU_WORKER_ID", buf);
        if (r < 0)
                return r;
        if (hostnames) {
                r = accel_env_set(env, "TPU_WORKER_HOSTNAMES", hostnames);
                if (r < 0)
                        return r;
        }

        if (local_world > 1) {
                /* Several processes share a host: each runs its own TPU runtime endpoint. */
                snprintf(buf, sizeof(buf), "%ld", TPU_PROCESS_BASE_PORT + local_rank);
                r = accel_env_set(env, "TPU_PROCESS_PORT", buf);
                if (r < 0)
                        return r;
                snprintf(buf, sizeof(buf), "%ld", accel_env_get_long(env, "AXCTL_RANK", 0));
                r = accel_env_set(env, "CLOUD_TPU_TASK_ID", buf);
                if (r < 0)
                        return r;
                if (hostnames) {
                        _cleanup_free_ char *addrs = tpu_process_addresses(hostnames, local_world);
                        if (addrs) {
                                r = accel_env_set(env, "TPU_PROCESS_ADDRESSES", addrs);
                                if (r < 0)
                                        return r;
                        }
                }
        }
        return 0;
}

/*
 * libtpu keeps chip health to itself; what the host can see is whether the chip is still
 * on the PCI bus and its device node still there. Both vanish when a chip falls off.
 */
static int tpu_health(const AccelDevice *devs, size_t n, const AccelConfig *cfg,
                      char **ret_reason) {
        const char *sys_root = cfg ? cfg->sys_root : NULL;
        bool have_sysfs = accel_path_exists(sys_root, "/sys/bus/pci/devices");
        char *reason = NULL;

        for (size_t i = 0; i < n; i++) {
                const AccelDevice *d = &devs[i];
                char path[64];

                if (d->dev_path[0] && access(d->dev_path, F_OK) < 0)
                        accel_str_append(&reason, "; ", "tpu %s: device node %s is gone",
                                         d->pci_bus_id, d->dev_path);
                snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", d->pci_bus_id);
                if (have_sysfs && !accel_path_exists(sys_root, path))
                        accel_str_append(&reason, "; ", "tpu %s: chip is gone from the PCI bus",
                                         d->pci_bus_id);
        }
        if (!reason)
                return 0;
        *ret_reason = reason;
        return 1;
}

const AccelBackend accel_backend_tpu = {
        .name = "tpu",
        .detect = tpu_detect,
        .devices_env = tpu_devices_env,
        .health = tpu_health,
};
