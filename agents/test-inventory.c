/* SPDX-License-Identifier: MIT */
/*
 * Inventory from hwloc exports. A real machine (IBM POWER8, 2 NUMA nodes, 16 PUs, four
 * P100 GPUs) gives the counts the controller schedules by and the register JSON built
 * from them; its device root is empty, so the check does not depend on which backends
 * are built in. A synthetic HGX H100 host with device nodes under a fake /dev gives
 * accelerators, which must come out indexed 0..n-1 in PCI bus order.
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inventory.h"
#include "protocol.h"
#include "test-util.h"

/* The inventory object of the register message built from inv. */
static json_t *inventory_json(const AgentInventory *inv) {
        static const AgentIdentity id = {.boot_id = "b", .agent_id = "a"};
        json_t *body = agent_proto_register_body("n1", "h", "127.0.0.1:1", &id, NULL, inv);
        json_t *j = json_incref(json_object_get(body, "inventory"));
        json_decref(body);
        return j;
}

static void test_power8(const char *xml) {
        _cleanup_free_ char *root = test_tmpdir();
        AccelConfig cfg = {.dev_root = root, .sys_root = root};
        AgentInventory inv;
        CHECK(agent_inventory_load(&inv, xml, &cfg) == 0);
        CHECK(inv.cpus == 16);
        CHECK(inv.numa_nodes == 2);
        /* 68556816384 + 68450713600 bytes of local memory. */
        CHECK(inv.memory_mb == 130660);
        for (size_t i = 0; i < inv.n_devs; i++)
                CHECK(inv.devs[i].index == (int) i);

        json_t *j = inventory_json(&inv);
        CHECK(json_integer_value(json_object_get(j, "cpus")) == 16);
        CHECK(json_integer_value(json_object_get(j, "numa_nodes")) == 2);
        CHECK(json_integer_value(json_object_get(j, "memory_mb")) == 130660);
        CHECK(json_array_size(json_object_get(j, "accelerators")) == inv.n_devs);
        json_decref(j);

        CHECK(agent_inventory_device(&inv, -1) == NULL);
        CHECK(agent_inventory_device(&inv, (int64_t) inv.n_devs) == NULL);
        agent_inventory_deinit(&inv);
        rmdir(root);
}

static void test_h100(const char *xml) {
        _cleanup_free_ char *root = test_fake_nvidia_root(8);
        AccelConfig cfg = {.dev_root = root, .sys_root = root};
        AgentInventory inv;
        CHECK(agent_inventory_load(&inv, xml, &cfg) == 0);
        CHECK(inv.numa_nodes == 2);
        /* Eight GPUs; the NVSwitches of the same vendor are not accelerators. */
        CHECK(inv.n_devs == 8);
        for (size_t i = 0; i < inv.n_devs; i++) {
                CHECK(inv.devs[i].index == (int) i);
                CHECK(strcmp(inv.devs[i].kind, "nvidia-h100") == 0);
                if (i > 0)
                        CHECK(strcmp(inv.devs[i - 1].pci_bus_id, inv.devs[i].pci_bus_id) < 0);
        }
        json_t *j = inventory_json(&inv);
        json_t *a = json_array_get(json_object_get(j, "accelerators"), 7);
        CHECK(json_integer_value(json_object_get(a, "index")) == 7);
        CHECK(strcmp(json_string_value(json_object_get(a, "pci_bus_id")), inv.devs[7].pci_bus_id) ==
              0);
        json_decref(j);
        agent_inventory_deinit(&inv);
        util_rm_rf(root);
}

static void test_missing_file(void) {
        AccelConfig cfg = {.dev_root = "", .sys_root = ""};
        AgentInventory inv = {.cpus = 42};
        CHECK(agent_inventory_load(&inv, "/nonexistent/topology.xml", &cfg) < 0);
        CHECK(inv.cpus == 42);
}

static void test_this_machine(void) {
        AccelConfig cfg = {.dev_root = "", .sys_root = ""};
        AgentInventory inv;
        CHECK(agent_inventory_load(&inv, NULL, &cfg) == 0);
        CHECK(inv.cpus >= 1);
        CHECK(inv.numa_nodes >= 1);
        /* MemTotal of /proc/meminfo, whatever the NUMA nodes' own counts say. */
        uint64_t total = (uint64_t) sysconf(_SC_PHYS_PAGES) * (uint64_t) sysconf(_SC_PAGESIZE);
        CHECK(inv.memory_mb == total / (1024 * 1024));
        agent_inventory_deinit(&inv);
}

int main(void) {
        test_missing_file();
        test_this_machine();

        const char *dir = getenv("TOPOLOGIES_DIR");
        const char *shared = getenv("SHARED_TOPOLOGIES_DIR");
        _cleanup_free_ char *h100 = xasprintf("%s/nvidia-h100x8.xml", dir ? dir : ".");
        _cleanup_free_ char *power8 = xasprintf("%s/power8-4gpu.xml", shared ? shared : ".");
        int skipped = 0;
        if (access(h100, R_OK) == 0)
                test_h100(h100);
        else
                skipped++;
        if (access(power8, R_OK) == 0)
                test_power8(power8);
        else
                skipped++;
        if (skipped == 2) {
                fprintf(stderr, "no topology files found: skipping the topology checks\n");
                return TEST_SKIP;
        }
        return 0;
}
