/* SPDX-License-Identifier: MIT */
/*
 * Inventory from a real machine's hwloc export (IBM POWER8, 2 NUMA nodes, 16 PUs, four
 * P100 GPUs): the counts the controller schedules by, and the register JSON built from
 * them. The device root is an empty directory, so backends that check device nodes
 * report no accelerators and the test does not depend on which backends are built in.
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inventory.h"
#include "test-util.h"

static void test_power8(const char *xml) {
        _cleanup_free_ char *root = test_tmpdir();
        AccelConfig cfg = { .dev_root = root, .sys_root = root };
        AgentInventory inv;
        CHECK(agent_inventory_load(&inv, xml, &cfg) == 0);
        CHECK(inv.cpus == 16);
        CHECK(inv.numa_nodes == 2);
        /* 68556816384 + 68450713600 bytes of local memory. */
        CHECK(inv.memory_mb == 130660);
        for (size_t i = 0; i < inv.n_devs; i++)
                CHECK(inv.devs[i].index == (int) i);

        json_t *j = agent_inventory_to_json(&inv);
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

static void test_missing_file(void) {
        AccelConfig cfg = { .dev_root = "", .sys_root = "" };
        AgentInventory inv = { .cpus = 42 };
        CHECK(agent_inventory_load(&inv, "/nonexistent/topology.xml", &cfg) < 0);
        CHECK(inv.cpus == 42);
}

static void test_this_machine(void) {
        AccelConfig cfg = { .dev_root = "", .sys_root = "" };
        AgentInventory inv;
        CHECK(agent_inventory_load(&inv, NULL, &cfg) == 0);
        CHECK(inv.cpus >= 1);
        CHECK(inv.numa_nodes >= 1);
        agent_inventory_deinit(&inv);
}

int main(void) {
        test_missing_file();
        test_this_machine();

        const char *dir = getenv("AXCTL_TOPOLOGY_DIR");
        _cleanup_free_ char *xml = xasprintf("%s/power8-4gpu.xml", dir ? dir : ".");
        if (access(xml, R_OK) < 0) {
                fprintf(stderr, "%s not found: skipping the topology checks\n", xml);
                return TEST_SKIP;
        }
        test_power8(xml);
        return 0;
}
