/* SPDX-License-Identifier: MIT */
/*
 * The table of accelerator backends and the inventory walk over it. A new vendor is one
 * file in this folder plus one extern and one line in the table below. The order of the
 * table is the order of the node inventory: backend by backend, and within a backend by
 * PCI bus id, so that device indices are stable across agent restarts and identical on
 * identical machines.
 */
#include "accel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

extern const AccelBackend accel_backend_cpu;
extern const AccelBackend accel_backend_nvidia;
extern const AccelBackend accel_backend_tpu;
extern const AccelBackend accel_backend_neuron;

const AccelBackend *const accel_backends[] = {
        &accel_backend_cpu, &accel_backend_nvidia, &accel_backend_tpu, &accel_backend_neuron, NULL,
};

static int accel_device_compare_bus(const void *a, const void *b) {
        const AccelDevice *x = a, *y = b;
        return strcmp(x->pci_bus_id, y->pci_bus_id);
}

int accel_detect_all(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **ret_devs,
                     size_t *ret_n) {
        AccelDevice *devs = NULL;
        size_t n = 0;

        for (size_t b = 0; accel_backends[b]; b++) {
                const AccelBackend *backend = accel_backends[b];
                size_t first = n;
                int r = backend->detect(topo, cfg, &devs, &n);
                if (r < 0) {
                        free(devs);
                        return r;
                }
                /*
                 * Backends may find devices in any order (hwloc walk, sysfs readdir);
                 * sort this backend's slice so indices follow the bus order.
                 */
                if (n > first + 1)
                        qsort(devs + first, n - first, sizeof(AccelDevice),
                              accel_device_compare_bus);
                /* vendor_index is the backend's: it follows the driver's numbering. */
                for (size_t i = first; i < n; i++)
                        devs[i].backend = backend;
        }
        for (size_t i = 0; i < n; i++)
                devs[i].index = (int) i;

        *ret_devs = devs;
        *ret_n = n;
        return 0;
}
