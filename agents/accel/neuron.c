/* SPDX-License-Identifier: MIT */
/*
 * The AWS Neuron backend (Trainium and Inferentia2). Devices are PCI vendor 0x1d0f with
 * the IDs of aws-neuron-driver's neuron_device.h (the same vendor also makes the EFA
 * and ENA NICs and the EBS NVMe controllers, so only known IDs count), each with a
 * node /dev/neuron<N> in PCI order. The Neuron runtime addresses NeuronCores, not
 * devices, so a rank's devices become a NEURON_RT_VISIBLE_CORES core list. Health comes
 * from the driver's uncorrected-ECC counters in sysfs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel.h"
#include "pci.h"
#include "util.h"

extern const AccelBackend accel_backend_neuron;

/*
 * Device IDs from aws-neuron-driver neuron_device.h (TRN1_DEVICE_ID0, INF2_DEVICE_ID0,
 * TRN2_DEVICE_ID0). NeuronCores per device from the Neuron architecture docs: Trainium
 * and Inferentia2 have 2 NeuronCore-v2, Trainium2 8 NeuronCore-v3. trn2 counts physical
 * cores, which the runtime exposes as such with NEURON_LOGICAL_NC_CONFIG=1 (set by the
 * trn2 launch profile); the runtime's default of 2 pairs them into 4 logical cores.
 */
static const AccelPciModel neuron_models[] = {
        {0x7164, "trn1", "Trainium", 2},
        {0x7264, "inf2", "Inferentia2", 2},
        {0x7364, "trn2", "Trainium2", 8},
};

/* Where the driver publishes per-device counters (neuron_sysfs_metrics.c). */
#define NEURON_SYSFS_DEVICE "/sys/devices/virtual/neuron_device/neuron%d"

static const struct {
        const char *file;
        const char *what;
} neuron_ecc_counters[] = {
        {"stats/hardware/mem_ecc_uncorrected", "uncorrected HBM ECC errors"},
        {"stats/hardware/sram_ecc_uncorrected", "uncorrected SRAM ECC errors"},
};

static bool neuron_node_find(const AccelDevice *dev, const AccelConfig *cfg, char *buf,
                             size_t size) {
        char path[32];

        snprintf(path, sizeof(path), "/dev/neuron%d", dev->vendor_index);
        return accel_path_join(buf, size, cfg->dev_root, path) &&
               accel_path_exists(cfg->dev_root, path);
}

static const AccelPciMatch neuron_match = {
        .vendor_id = 0x1d0f,
        .models = neuron_models,
        .n_models = ELEMENTSOF(neuron_models),
        .fallback_kind = NULL,
        .node_find = neuron_node_find,
};

static int neuron_detect(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **devs,
                         size_t *n_devs) {
        return accel_pci_detect(topo, cfg, &accel_backend_neuron, &neuron_match, devs, n_devs);
}

/*
 * NEURON_RT_ROOT_COMM_ID: the host of AXCTL_COORDINATOR with the port after it, so the
 * runtime's bootstrap never collides with the framework's own coordinator.
 */
static char *neuron_root_comm_id(const char *coordinator) {
        const char *colon = strrchr(coordinator, ':');
        char *end;
        long port;

        if (!colon || colon == coordinator)
                return NULL;
        errno = 0;
        port = strtol(colon + 1, &end, 10);
        if (errno != 0 || end == colon + 1 || *end != '\0' || port <= 0 || port >= 65535)
                return NULL;
        return xasprintf("%.*s:%ld", (int) (colon - coordinator), coordinator, port + 1);
}

static int neuron_devices_env(const AccelDevice *const *devs, size_t n, json_t *env) {
        _cleanup_free_ const AccelDevice **sorted = accel_devices_sort(devs, n);
        _cleanup_free_ char *cores = xstrdup("");
        _cleanup_free_ char *per_process = NULL;
        const char *coordinator = accel_env_get(env, "AXCTL_COORDINATOR");
        long world = accel_env_get_long(env, "AXCTL_WORLD_SIZE", 1);
        unsigned total = 0;
        char buf[32];
        int r;

        for (size_t i = 0; i < n; i++) {
                unsigned c = sorted[i]->cores ? sorted[i]->cores : 1;
                unsigned first = (unsigned) sorted[i]->vendor_index * c;

                if (c == 1)
                        accel_str_append(&cores, ",", "%u", first);
                else
                        accel_str_append(&cores, ",", "%u-%u", first, first + c - 1);
                total += c;
        }
        r = accel_env_set(env, "NEURON_RT_VISIBLE_CORES", cores);
        if (r < 0)
                return r;

        if (coordinator) {
                _cleanup_free_ char *comm = neuron_root_comm_id(coordinator);
                if (comm) {
                        r = accel_env_set(env, "NEURON_RT_ROOT_COMM_ID", comm);
                        if (r < 0)
                                return r;
                }
        }

        snprintf(buf, sizeof(buf), "%ld", accel_env_get_long(env, "AXCTL_RANK", 0));
        r = accel_env_set(env, "NEURON_PJRT_PROCESS_INDEX", buf);
        if (r < 0)
                return r;
        /*
         * One entry per process with its NeuronCore count, as torch-neuronx and
         * jax-neuronx read it. Gangs are uniform, so every rank holds as many as this one.
         */
        for (long i = 0; i < (world > 0 ? world : 1); i++)
                accel_str_append(&per_process, ",", "%u", total);
        return accel_env_set(env, "NEURON_PJRT_PROCESSES_NUM_DEVICES", per_process);
}

/*
 * The driver's own number for a device, which names its sysfs directory: the N of the
 * /dev/neuron<N> found at detection. vendor_index differs when some nodes are missing.
 */
static int neuron_driver_index(const AccelDevice *d) {
        const char *base = strrchr(d->dev_path, '/');
        int index;

        if (base && sscanf(base, "/neuron%d", &index) == 1 && index >= 0)
                return index;
        return d->vendor_index;
}

static int neuron_health(const AccelDevice *devs, size_t n, const AccelConfig *cfg,
                         char **ret_reason) {
        char *reason = NULL;

        for (size_t i = 0; i < n; i++) {
                const AccelDevice *d = &devs[i];
                char dir[64];

                if (d->dev_path[0] && access(d->dev_path, F_OK) < 0) {
                        accel_str_append(&reason, "; ", "neuron %s: device node %s is gone",
                                         d->pci_bus_id, d->dev_path);
                        continue;
                }
                snprintf(dir, sizeof(dir), NEURON_SYSFS_DEVICE, neuron_driver_index(d));
                for (size_t k = 0; k < ELEMENTSOF(neuron_ecc_counters); k++) {
                        _cleanup_free_ char *path =
                                xasprintf("%s/%s", dir, neuron_ecc_counters[k].file);
                        unsigned long long v;

                        /* Older drivers lack the counters: no data, not a fault. */
                        if (accel_read_counter(cfg ? cfg->sys_root : NULL, path, &v) < 0 || v == 0)
                                continue;
                        accel_str_append(&reason, "; ", "neuron %s (neuron%d): %llu %s",
                                         d->pci_bus_id, neuron_driver_index(d), v,
                                         neuron_ecc_counters[k].what);
                }
        }
        if (!reason)
                return 0;
        *ret_reason = reason;
        return 1;
}

const AccelBackend accel_backend_neuron = {
        .name = "neuron",
        .detect = neuron_detect,
        .devices_env = neuron_devices_env,
        .health = neuron_health,
};
