/* SPDX-License-Identifier: MIT */
/*
 * Node inventory from hwloc; see inventory.h. The topology is only needed while the
 * backends look for devices, so it is destroyed before returning: everything later
 * (device visibility, health) works from the AccelDevice records.
 */
#include "inventory.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static int inventory_topology_open(const char *topology_xml, hwloc_topology_t *ret) {
        hwloc_topology_t topo;
        if (hwloc_topology_init(&topo) < 0)
                return -errno ? -errno : -ENOMEM;
        /* PCI objects are filtered out by default; backends need them all. */
        int r = hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
        /* The accelerator backends read PCI and their vendors' runtimes. hwloc's OpenCL
         * and GL plugins (where libhwloc-plugins is installed) would open every OpenCL
         * driver and X display in the agent, slowly, for nothing it uses. */
        for (const char *const *c = (const char *const[]){"opencl", "gl", NULL}; r >= 0 && *c; c++)
                r = hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                                  *c);
        if (r >= 0 && topology_xml)
                r = hwloc_topology_set_xml(topo, topology_xml);
        if (r >= 0)
                r = hwloc_topology_load(topo);
        if (r < 0) {
                r = errno > 0 ? -errno : -EINVAL;
                hwloc_topology_destroy(topo);
                return r;
        }
        *ret = topo;
        return 0;
}

/*
 * The running machine's RAM as the kernel counts it (MemTotal). hwloc adds up the NUMA
 * nodes' own MemTotal instead, which lags behind on a kernel that initialises memory
 * lazily after boot: a Firecracker GPU VM (deferred_init=lazy) showed 4.3 GiB in
 * node0/meminfo against 126 GiB in /proc/meminfo, and ranks asking for more than the
 * smaller figure would never have been placed there (docs/TESTING.md).
 */
static uint64_t inventory_kernel_memory(void) {
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        return pages > 0 && page_size > 0 ? (uint64_t) pages * (uint64_t) page_size : 0;
}

int agent_inventory_load(AgentInventory *inv, const char *topology_xml, const AccelConfig *cfg) {
        hwloc_topology_t topo = NULL;
        int r = inventory_topology_open(topology_xml, &topo);
        if (r < 0)
                return r;

        int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
        int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
        hwloc_obj_t root = hwloc_get_root_obj(topo);
        uint64_t memory = root ? root->total_memory : 0;
        /* An export describes another host: only the live machine is the kernel's. */
        uint64_t kernel_memory = topology_xml ? 0 : inventory_kernel_memory();
        if (kernel_memory > 0)
                memory = kernel_memory;

        AccelDevice *devs = NULL;
        size_t n_devs = 0;
        r = accel_detect_all(topo, cfg, &devs, &n_devs);
        hwloc_topology_destroy(topo);
        if (r < 0)
                return r;

        *inv = (AgentInventory){
                .cpus = pus > 0 ? (unsigned) pus : 0,
                .memory_mb = memory / (1024 * 1024),
                /* A machine without NUMA information is one node. */
                .numa_nodes = numa > 0 ? (unsigned) numa : 1,
                .devs = devs,
                .n_devs = n_devs,
        };
        return 0;
}

void agent_inventory_deinit(AgentInventory *inv) {
        free(inv->devs);
        *inv = (AgentInventory){0};
}

json_t *agent_inventory_accelerators(const AgentInventory *inv) {
        json_t *accels = json_array();
        for (size_t i = 0; i < inv->n_devs; i++) {
                const AccelDevice *d = &inv->devs[i];
                json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:i, s:s}", "kind", d->kind, "model",
                                      d->model, "index", (json_int_t) d->index, "pci_bus_id",
                                      d->pci_bus_id, "numa_node", (json_int_t) d->numa_node, "uuid",
                                      d->uuid);
                /*
                 * Beyond docs/PROTOCOL.md, for the scheduler's locality choices; the
                 * controller accepts extra keys in device entries.
                 */
                json_object_set_new(o, "pcie_switch", json_integer(d->pcie_switch));
                if (d->cores > 0)
                        json_object_set_new(o, "cores", json_integer(d->cores));
                json_array_append_new(accels, o);
        }
        return accels;
}

const AccelDevice *agent_inventory_device(const AgentInventory *inv, int64_t i) {
        if (i < 0 || (uint64_t) i >= inv->n_devs)
                return NULL;
        return &inv->devs[i];
}
