/* SPDX-License-Identifier: MIT */
/*
 * The node inventory the agent registers with: CPUs, memory and NUMA nodes counted from
 * the hwloc topology (the real machine, or an XML export for tests and for nodes whose
 * discovery must be pinned), plus the accelerators every backend finds in it. The
 * memory of the real machine is the kernel's total, not hwloc's (see inventory.c).
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/accel.h"

typedef struct AgentInventory {
        unsigned cpus; /* processing units (hardware threads) */
        uint64_t memory_mb; /* MiB: the kernel's MemTotal; an export's NUMA nodes summed */
        unsigned numa_nodes;
        AccelDevice *devs; /* in inventory order: devs[i].index == i */
        size_t n_devs;
        const char *containment; /* static: how ranks are contained (the agent sets it) */
} AgentInventory;

/*
 * Loads the topology (from topology_xml when not NULL, else the running machine, with
 * all I/O objects kept so backends see PCI devices) and fills inv. Returns 0 or -errno;
 * inv is untouched on failure.
 */
int agent_inventory_load(AgentInventory *inv, const char *topology_xml, const AccelConfig *cfg);
void agent_inventory_deinit(AgentInventory *inv);

/* The "inventory.accelerators" list of the register message (docs/PROTOCOL.md). */
json_t *agent_inventory_accelerators(const AgentInventory *inv);

/* Device at inventory index i, or NULL when out of range. */
const AccelDevice *agent_inventory_device(const AgentInventory *inv, int64_t i);
