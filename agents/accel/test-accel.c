/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the vendor accelerator backends and launch profiles: detection on real
 * hwloc exports (DGX-2 with 16 V100 and 12 NVSwitches, POWER8 with 4 P100, the H100 VM
 * of docs/TESTING.md's real-GPU check) and on the synthetic H100, TPU v5p and trn2
 * hosts of tests/topologies, with device nodes faked as empty files under a temporary
 * dev root; the visibility environment per vendor;
 * profile precedence; NVML health through tests/fakenvml's libnvidia-ml.so.1.
 *
 * Paths come from meson: TOPOLOGIES_DIR, SHARED_TOPOLOGIES_DIR, FAKENVML_LIBRARY and
 * PROFILES_DIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel.h"
#include "pci.h"
#include "util.h"

extern const AccelBackend accel_backend_nvidia;
extern const AccelBackend accel_backend_tpu;
extern const AccelBackend accel_backend_neuron;

static int failures;
static char tmp_root[] = "/tmp/axctl-test-accel-XXXXXX";

#define CHECK(cond)                                                                              \
        do {                                                                                     \
                if (!(cond)) {                                                                   \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                        failures++;                                                              \
                }                                                                                \
        } while (0)

#define CHECK_STREQ(a, b)                                                                   \
        do {                                                                                \
                const char *_a = (a), *_b = (b);                                            \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                    \
                        fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, \
                                __LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)");      \
                        failures++;                                                         \
                }                                                                           \
        } while (0)

/* ---- fixtures ---- */

static char *tmp_path(const char *fmt, ...) _printf_(1, 2);
static char *tmp_path(const char *fmt, ...) {
        _cleanup_free_ char *rel = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&rel, fmt, ap) < 0)
                abort();
        va_end(ap);
        return xasprintf("%s/%s", tmp_root, rel);
}

/* Creates an empty file (and its parents), as a stand-in device node or counter. */
static void touch(const char *path, const char *content) {
        _cleanup_free_ char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');

        *slash = '\0';
        if (util_mkdir_p(dir, 0755) < 0 ||
            util_write_file_atomic(path, content, strlen(content)) < 0) {
                fprintf(stderr, "cannot create %s: %m\n", path);
                exit(EXIT_FAILURE);
        }
}

/* A dev root "<tmp>/<name>" holding "/dev/<prefix><i>" for i in [0, n) except skip. */
static char *dev_root_make(const char *name, const char *prefix, int n, int skip) {
        char *root = tmp_path("%s", name);

        util_rm_rf(root);
        for (int i = 0; i < n; i++) {
                if (i == skip)
                        continue;
                _cleanup_free_ char *p = xasprintf("%s/dev/%s%d", root, prefix, i);
                touch(p, "");
        }
        return root;
}

static hwloc_topology_t topo_load(const char *dir, const char *file) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        hwloc_topology_t topo;

        if (hwloc_topology_init(&topo) < 0)
                abort();
        /* As the agent does: keep every PCI object, bridges included. */
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
        if (hwloc_topology_set_xml(topo, path) < 0 || hwloc_topology_load(topo) < 0) {
                fprintf(stderr, "cannot load topology %s: %m\n", path);
                exit(EXIT_FAILURE);
        }
        return topo;
}

static size_t detect(const AccelBackend *b, hwloc_topology_t topo, const AccelConfig *cfg,
                     AccelDevice **devs) {
        size_t n = 0;

        *devs = NULL;
        CHECK(b->detect(topo, cfg, devs, &n) == 0);
        return n;
}

static size_t distinct_switches(const AccelDevice *devs, size_t n) {
        size_t count = 0;

        for (size_t i = 0; i < n; i++) {
                bool seen = false;
                for (size_t j = 0; j < i; j++)
                        seen |= devs[j].pcie_switch == devs[i].pcie_switch;
                count += !seen;
        }
        return count;
}

static const char *env_str(json_t *env, const char *key) {
        return json_string_value(json_object_get(env, key));
}

/* ---- detection ---- */

static void test_dgx2(const char *shared) {
        hwloc_topology_t topo = topo_load(shared, "nvidia-dgx2-v100x16.xml");
        _cleanup_free_ char *root = dev_root_make("dgx2", "nvidia", 16, -1);
        AccelConfig cfg = {.dev_root = root,
                           .sys_root = root,
                           .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
        static const char *const bus[16] = {
                "0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0",
                "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0",
                "0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0",
                "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0",
        };
        _cleanup_free_ AccelDevice *devs = NULL;
        size_t n = detect(&accel_backend_nvidia, topo, &cfg, &devs);

        /* The 12 NVSwitches are NVIDIA's too, but class 0680: not GPUs. */
        CHECK(n == 16);
        for (size_t i = 0; i < n && i < 16; i++) {
                _cleanup_free_ char *node = xasprintf("%s/dev/nvidia%zu", root, i);
                CHECK_STREQ(devs[i].kind, "nvidia-v100");
                CHECK_STREQ(devs[i].model, "Tesla V100 SXM3 32GB");
                CHECK_STREQ(devs[i].pci_bus_id, bus[i]);
                CHECK(devs[i].vendor_index == (int) i);
                CHECK(devs[i].numa_node == (i < 8 ? 0 : 1));
                CHECK(devs[i].backend == &accel_backend_nvidia);
                CHECK_STREQ(devs[i].dev_path, node);
                CHECK(devs[i].uuid[0] == '\0'); /* no NVML */
                CHECK(devs[i].pcie_switch >= 0);
                /* Pairs of GPUs share a PLX switch: 34/36 under 32:00.0, and so on. */
                if (i % 2 == 1)
                        CHECK(devs[i].pcie_switch == devs[i - 1].pcie_switch);
        }
        CHECK(distinct_switches(devs, n) == 8);
        CHECK(n > 0 && devs[0].pcie_switch == 0x3200);

        /* A GPU whose node is missing is left out; the others are renumbered. */
        _cleanup_free_ char *root2 = dev_root_make("dgx2-missing", "nvidia", 16, 3);
        _cleanup_free_ AccelDevice *devs2 = NULL;
        cfg.dev_root = root2;
        n = detect(&accel_backend_nvidia, topo, &cfg, &devs2);
        CHECK(n == 15);
        for (size_t i = 0; i < n; i++)
                CHECK(strcmp(devs2[i].pci_bus_id, "0000:3b:00.0") != 0);
        if (n == 15) {
                _cleanup_free_ char *node4 = xasprintf("%s/dev/nvidia4", root2);
                CHECK_STREQ(devs2[3].pci_bus_id, "0000:57:00.0");
                CHECK_STREQ(devs2[3].dev_path, node4);
                CHECK(devs2[3].vendor_index == 3);
        }

        /* Through the registry: same devices, inventory indices in order. */
        _cleanup_free_ AccelDevice *all = NULL;
        size_t n_all = 0;
        cfg.dev_root = root;
        CHECK(accel_detect_all(topo, &cfg, &all, &n_all) == 0);
        CHECK(n_all == 16);
        for (size_t i = 0; i < n_all; i++) {
                CHECK(all[i].index == (int) i);
                CHECK(all[i].backend == &accel_backend_nvidia);
        }

        /* No device nodes at all: nothing usable. */
        _cleanup_free_ char *empty = tmp_path("empty");
        _cleanup_free_ AccelDevice *none = NULL;
        cfg.dev_root = empty;
        CHECK(detect(&accel_backend_nvidia, topo, &cfg, &none) == 0);
        hwloc_topology_destroy(topo);
}

static void test_power8(const char *shared) {
        hwloc_topology_t topo = topo_load(shared, "power8-4gpu.xml");
        _cleanup_free_ char *root = dev_root_make("power8", "nvidia", 4, -1);
        AccelConfig cfg = {.dev_root = root,
                           .sys_root = root,
                           .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
        static const char *const bus[4] = {"0002:01:00.0", "0003:01:00.0", "000a:01:00.0",
                                           "000b:01:00.0"};
        _cleanup_free_ AccelDevice *devs = NULL;
        size_t n = detect(&accel_backend_nvidia, topo, &cfg, &devs);

        CHECK(n == 4);
        for (size_t i = 0; i < n && i < 4; i++) {
                CHECK_STREQ(devs[i].kind, "nvidia-p100");
                CHECK_STREQ(devs[i].pci_bus_id, bus[i]);
                CHECK(devs[i].numa_node == (i < 2 ? 0 : 1));
                /* Each GPU hangs off its own root port: no switch to share. */
                CHECK(devs[i].pcie_switch == -1);
        }
        hwloc_topology_destroy(topo);
}

static void test_h100(const char *dir) {
        hwloc_topology_t topo = topo_load(dir, "nvidia-h100x8.xml");
        _cleanup_free_ char *root = dev_root_make("h100", "nvidia", 8, -1);
        AccelConfig cfg = {.dev_root = root,
                           .sys_root = root,
                           .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
        _cleanup_free_ AccelDevice *devs = NULL;
        size_t n = detect(&accel_backend_nvidia, topo, &cfg, &devs);

        /* The 4 NVSwitches (class 0680) and the BMC's ASPEED VGA are not counted. */
        CHECK(n == 8);
        for (size_t i = 0; i < n; i++) {
                CHECK_STREQ(devs[i].kind, "nvidia-h100");
                CHECK_STREQ(devs[i].model, "H100 SXM5 80GB");
                CHECK(devs[i].numa_node == (i < 4 ? 0 : 1));
                CHECK(devs[i].pcie_switch >= 0);
                CHECK(devs[i].pcie_switch == devs[i & ~(size_t) 1].pcie_switch);
        }
        CHECK(distinct_switches(devs, n) == 4);
        CHECK(n == 8 && strcmp(devs[0].pci_bus_id, "0000:18:00.0") == 0 &&
              strcmp(devs[7].pci_bus_id, "0000:c9:00.0") == 0);
        hwloc_topology_destroy(topo);
}

static void test_tpu(const char *dir) {
        hwloc_topology_t topo = topo_load(dir, "tpu-v5p-4chip.xml");
        _cleanup_free_ char *root = dev_root_make("tpu", "accel", 4, -1);
        AccelConfig cfg = {.dev_root = root, .sys_root = root};
        _cleanup_free_ AccelDevice *devs = NULL;
        size_t n = detect(&accel_backend_tpu, topo, &cfg, &devs);

        /* gVNIC is Google's (1ae0:0042) but not a TPU. */
        CHECK(n == 4);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *node = xasprintf("%s/dev/accel%zu", root, i);
                CHECK_STREQ(devs[i].kind, "tpu-v5p");
                CHECK(devs[i].numa_node == (i < 2 ? 0 : 1));
                CHECK(devs[i].pcie_switch == -1);
                CHECK_STREQ(devs[i].dev_path, node);
        }
        CHECK(n == 4 && strcmp(devs[2].pci_bus_id, "0000:80:04.0") == 0);
        CHECK(accel_backend_tpu.health(devs, n, &cfg, NULL) == 0);

        /* A chip whose node vanished is unhealthy. */
        char *reason = NULL;
        if (n == 4) {
                unlink(devs[1].dev_path);
                CHECK(accel_backend_tpu.health(devs, n, &cfg, &reason) == 1);
                CHECK(reason && strstr(reason, "tpu 0000:00:05.0: device node"));
                free(reason);
        }

        /* VFIO hosts: /dev/vfio/<IOMMU group>, the group read from sysfs when there. */
        _cleanup_free_ char *vroot = tmp_path("tpu-vfio");
        _cleanup_free_ AccelDevice *vdevs = NULL;
        util_rm_rf(vroot);
        for (int g = 0; g < 4; g++) {
                _cleanup_free_ char *p = xasprintf("%s/dev/vfio/%d", vroot, g == 0 ? 17 : g);
                touch(p, "");
        }
        _cleanup_free_ char *grp = xasprintf("%s/sys/bus/pci/devices/0000:00:04.0", vroot);
        _cleanup_free_ char *link = xasprintf("%s/iommu_group", grp);
        CHECK(util_mkdir_p(grp, 0755) == 0);
        CHECK(symlink("../../../../kernel/iommu_groups/17", link) == 0);
        cfg.dev_root = vroot;
        cfg.sys_root = vroot;
        n = detect(&accel_backend_tpu, topo, &cfg, &vdevs);
        CHECK(n == 4);
        if (n == 4) {
                _cleanup_free_ char *g17 = xasprintf("%s/dev/vfio/17", vroot);
                _cleanup_free_ char *g3 = xasprintf("%s/dev/vfio/3", vroot);
                CHECK_STREQ(vdevs[0].dev_path, g17);
                CHECK_STREQ(vdevs[3].dev_path, g3);
                /* sysfs is there and lists only the first chip: the others are gone. */
                reason = NULL;
                CHECK(accel_backend_tpu.health(vdevs, n, &cfg, &reason) == 1);
                CHECK(reason && strstr(reason, "tpu 0000:00:05.0: chip is gone") &&
                      !strstr(reason, "0000:00:04.0"));
                free(reason);
        }
        hwloc_topology_destroy(topo);
}

static void test_trn2(const char *dir) {
        hwloc_topology_t topo = topo_load(dir, "trn2-16dev.xml");
        _cleanup_free_ char *root = dev_root_make("trn2", "neuron", 16, -1);
        AccelConfig cfg = {.dev_root = root, .sys_root = root};
        _cleanup_free_ AccelDevice *devs = NULL;
        size_t n = detect(&accel_backend_neuron, topo, &cfg, &devs);

        /* EFA, ENA and EBS NVMe are Amazon's (1d0f) but not Neuron devices. */
        CHECK(n == 16);
        for (size_t i = 0; i < n; i++) {
                CHECK_STREQ(devs[i].kind, "trn2");
                CHECK(devs[i].cores == 8);
                CHECK(devs[i].vendor_index == (int) i);
                CHECK(devs[i].numa_node == (i < 8 ? 0 : 1));
                CHECK(devs[i].pcie_switch == devs[i & ~(size_t) 3].pcie_switch);
        }
        CHECK(distinct_switches(devs, n) == 4);

        /* Neuron health: the driver's uncorrected ECC counters in sysfs. */
        char *reason = NULL;
        CHECK(accel_backend_neuron.health(devs, n, &cfg, &reason) == 0); /* no counters */
        _cleanup_free_ char *ok = xasprintf(
                "%s/sys/devices/virtual/neuron_device/neuron0/stats/hardware/mem_ecc_uncorrected",
                root);
        _cleanup_free_ char *bad = xasprintf(
                "%s/sys/devices/virtual/neuron_device/neuron5/stats/hardware/sram_ecc_uncorrected",
                root);
        touch(ok, "0\n");
        CHECK(accel_backend_neuron.health(devs, n, &cfg, &reason) == 0);
        touch(bad, "2\n");
        CHECK(accel_backend_neuron.health(devs, n, &cfg, &reason) == 1);
        if (n == 16) {
                _cleanup_free_ char *want = xasprintf(
                        "neuron %s (neuron5): 2 uncorrected SRAM ECC errors", devs[5].pci_bus_id);
                CHECK_STREQ(reason, want);
        }
        free(reason);
        hwloc_topology_destroy(topo);
}

/* ---- visibility environment ---- */

static AccelDevice fake_device(const AccelBackend *b, const char *kind, int vendor_index,
                               unsigned cores) {
        AccelDevice d = {.backend = b,
                         .vendor_index = vendor_index,
                         .cores = cores,
                         .numa_node = -1,
                         .pcie_switch = -1};

        snprintf(d.kind, sizeof(d.kind), "%s", kind);
        snprintf(d.pci_bus_id, sizeof(d.pci_bus_id), "0000:%02x:00.0", 0x10 + vendor_index);
        return d;
}

static json_t *rank_env(long rank, long local_rank, long local_world, long node_rank,
                        long num_nodes, const char *hostnames) {
        json_t *env = json_object();
        char buf[32];

#define SET(k, v)                                              \
        do {                                                   \
                snprintf(buf, sizeof(buf), "%ld", (long) (v)); \
                json_object_set_new(env, k, json_string(buf)); \
        } while (0)
        SET("AXCTL_RANK", rank);
        SET("AXCTL_LOCAL_RANK", local_rank);
        SET("AXCTL_LOCAL_WORLD_SIZE", local_world);
        SET("AXCTL_NODE_RANK", node_rank);
        SET("AXCTL_NUM_NODES", num_nodes);
        SET("AXCTL_WORLD_SIZE", local_world * num_nodes);
#undef SET
        if (hostnames)
                json_object_set_new(env, "AXCTL_NODE_HOSTNAMES", json_string(hostnames));
        json_object_set_new(env, "AXCTL_COORDINATOR", json_string("10.0.0.1:5000"));
        return env;
}

static void test_env_nvidia(void) {
        AccelDevice a = fake_device(&accel_backend_nvidia, "nvidia-h100", 3, 0);
        AccelDevice b = fake_device(&accel_backend_nvidia, "nvidia-h100", 1, 0);
        const AccelDevice *devs[] = {&a, &b};
        json_t *env = rank_env(0, 0, 1, 0, 1, NULL);

        CHECK(accel_backend_nvidia.devices_env(devs, 2, env) == 0);
        CHECK_STREQ(env_str(env, "CUDA_VISIBLE_DEVICES"), "1,3");
        CHECK_STREQ(env_str(env, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
        CHECK(accel_backend_nvidia.devices_env(devs, 0, env) == 0);
        CHECK_STREQ(env_str(env, "CUDA_VISIBLE_DEVICES"), "");
        json_decref(env);
}

static void test_env_tpu(void) {
        AccelDevice c[4];
        const AccelDevice *devs[4];

        for (int i = 0; i < 4; i++) {
                c[i] = fake_device(&accel_backend_tpu, "tpu-v5p", 3 - i, 0);
                devs[i] = &c[i];
        }

        /* One process per host holding all 4 chips, second host of two. */
        json_t *env = rank_env(1, 0, 1, 1, 2, "tpu-host-0,tpu-host-1");
        CHECK(accel_backend_tpu.devices_env(devs, 4, env) == 0);
        CHECK_STREQ(env_str(env, "TPU_VISIBLE_CHIPS"), "0,1,2,3");
        CHECK_STREQ(env_str(env, "TPU_CHIPS_PER_PROCESS_BOUNDS"), "2,2,1");
        CHECK_STREQ(env_str(env, "TPU_PROCESS_BOUNDS"), "1,1,2");
        CHECK_STREQ(env_str(env, "TPU_WORKER_ID"), "1");
        CHECK_STREQ(env_str(env, "TPU_WORKER_HOSTNAMES"), "tpu-host-0,tpu-host-1");
        CHECK(!json_object_get(env, "TPU_PROCESS_PORT"));
        CHECK(!json_object_get(env, "TPU_PROCESS_ADDRESSES"));
        json_decref(env);

        /* Four processes per host, one chip each: rank 5 is local rank 1 on host 1. */
        env = rank_env(5, 1, 4, 1, 2, "h0,h1");
        CHECK(accel_backend_tpu.devices_env(&devs[2], 1, env) == 0);
        CHECK_STREQ(env_str(env, "TPU_VISIBLE_CHIPS"), "1");
        CHECK_STREQ(env_str(env, "TPU_CHIPS_PER_PROCESS_BOUNDS"), "1,1,1");
        CHECK_STREQ(env_str(env, "TPU_PROCESS_BOUNDS"), "1,1,8");
        CHECK_STREQ(env_str(env, "TPU_WORKER_ID"), "1");
        CHECK_STREQ(env_str(env, "TPU_PROCESS_PORT"), "8477");
        CHECK_STREQ(env_str(env, "CLOUD_TPU_TASK_ID"), "5");
        CHECK_STREQ(env_str(env, "TPU_PROCESS_ADDRESSES"),
                    "h0:8476,h0:8477,h0:8478,h0:8479,h1:8476,h1:8477,h1:8478,h1:8479");
        json_decref(env);

        /* Two chips; a job that knows its slice shape keeps its own process bounds. */
        env = rank_env(0, 0, 2, 0, 1, NULL);
        json_object_set_new(env, "TPU_PROCESS_BOUNDS", json_string("2,1,1"));
        CHECK(accel_backend_tpu.devices_env(&devs[2], 2, env) == 0);
        CHECK_STREQ(env_str(env, "TPU_VISIBLE_CHIPS"), "0,1");
        CHECK_STREQ(env_str(env, "TPU_CHIPS_PER_PROCESS_BOUNDS"), "2,1,1");
        CHECK_STREQ(env_str(env, "TPU_PROCESS_BOUNDS"), "2,1,1");
        CHECK(!json_object_get(env, "TPU_WORKER_HOSTNAMES"));
        json_decref(env);
}

static void test_env_neuron(void) {
        AccelDevice d0 = fake_device(&accel_backend_neuron, "trn2", 0, 8);
        AccelDevice d1 = fake_device(&accel_backend_neuron, "trn2", 1, 8);
        AccelDevice t3 = fake_device(&accel_backend_neuron, "trn1", 3, 2);
        const AccelDevice *both[] = {&d1, &d0};
        const AccelDevice *one[] = {&d1};
        const AccelDevice *trn1[] = {&t3};

        json_t *env = rank_env(3, 1, 2, 1, 2, NULL);
        CHECK(accel_backend_neuron.devices_env(both, 2, env) == 0);
        CHECK_STREQ(env_str(env, "NEURON_RT_VISIBLE_CORES"), "0-7,8-15");
        CHECK_STREQ(env_str(env, "NEURON_RT_ROOT_COMM_ID"), "10.0.0.1:5001");
        CHECK_STREQ(env_str(env, "NEURON_PJRT_PROCESS_INDEX"), "3");
        CHECK_STREQ(env_str(env, "NEURON_PJRT_PROCESSES_NUM_DEVICES"), "16,16,16,16");
        json_decref(env);

        env = rank_env(0, 0, 1, 0, 1, NULL);
        json_object_set_new(env, "AXCTL_COORDINATOR", json_string("[fd00::1]:29500"));
        CHECK(accel_backend_neuron.devices_env(one, 1, env) == 0);
        CHECK_STREQ(env_str(env, "NEURON_RT_VISIBLE_CORES"), "8-15");
        CHECK_STREQ(env_str(env, "NEURON_RT_ROOT_COMM_ID"), "[fd00::1]:29501");
        CHECK_STREQ(env_str(env, "NEURON_PJRT_PROCESSES_NUM_DEVICES"), "8");
        CHECK(accel_backend_neuron.devices_env(trn1, 1, env) == 0);
        CHECK_STREQ(env_str(env, "NEURON_RT_VISIBLE_CORES"), "6-7");
        json_decref(env);
}

/* ---- launch profiles ---- */

static void test_profiles(const char *shipped) {
        _cleanup_free_ char *dir = tmp_path("profiles");
        _cleanup_free_ char *vendor = xasprintf("%s/nvidia.env", dir);
        _cleanup_free_ char *model = xasprintf("%s/nvidia-h100.env", dir);
        _cleanup_free_ char *broken = xasprintf("%s/tpu-v5p.env", dir);
        json_t *env;

        touch(vendor, "# vendor defaults\nA=vendor\nB=vendor\n\nC = vendor c \n"
                      "export D=\"quoted value\"\nE='single'\n");
        touch(model, "A=model\nB=model\nB=model-last\nXLA_FLAGS=--x=1 --y=2\n");
        touch(broken, "GOOD=1\nthis line has no equals sign\n");

        env = json_object();
        json_object_set_new(env, "A", json_string("job"));
        CHECK(accel_profile_apply(dir, "nvidia-h100", env) == 0);
        CHECK_STREQ(env_str(env, "A"), "job"); /* the job's env wins */
        CHECK_STREQ(env_str(env, "B"), "model-last"); /* model file over vendor file */
        CHECK_STREQ(env_str(env, "C"), "vendor c"); /* only the vendor file has it */
        CHECK_STREQ(env_str(env, "D"), "quoted value");
        CHECK_STREQ(env_str(env, "E"), "single");
        CHECK_STREQ(env_str(env, "XLA_FLAGS"), "--x=1 --y=2");
        json_decref(env);

        /* A kind without a file of its own gets its vendor's. */
        env = json_object();
        CHECK(accel_profile_apply(dir, "nvidia-v100", env) == 0);
        CHECK_STREQ(env_str(env, "B"), "vendor");
        json_decref(env);

        /* No file at all, or no profile dir: nothing to do, not an error. */
        env = json_object();
        CHECK(accel_profile_apply(dir, "trn2", env) == 0);
        CHECK(accel_profile_apply(NULL, "trn2", env) == 0);
        CHECK(accel_profile_apply("/nonexistent/profiles", "trn2", env) == 0);
        CHECK(json_object_size(env) == 0);

        /* A malformed file is rejected whole; a kind that is not a file name too. */
        CHECK(accel_profile_apply(dir, "tpu-v5p", env) == -EBADMSG);
        CHECK(!json_object_get(env, "GOOD"));
        CHECK(accel_profile_apply(dir, "../nvidia", env) == -EINVAL);
        CHECK(accel_profile_apply(dir, "a/b", env) == -EINVAL);
        json_decref(env);

        /* Every shipped profile parses and gives its kind something. */
        static const char *const kinds[] = {
                "nvidia-v100", "nvidia-a100", "nvidia-h100", "nvidia-h200", "tpu-v4", "tpu-v5e",
                "tpu-v5p",     "tpu-v6e",     "trn1",        "trn2",        "inf2"};
        for (size_t i = 0; shipped && i < ELEMENTSOF(kinds); i++) {
                env = json_object();
                CHECK(accel_profile_apply(shipped, kinds[i], env) == 0);
                CHECK(json_object_size(env) > 0);
                if (strncmp(kinds[i], "tpu-", 4) == 0)
                        CHECK(env_str(env, "LIBTPU_INIT_ARGS"));
                json_decref(env);
        }
        env = json_object();
        CHECK(accel_profile_apply(shipped, "trn2", env) == 0);
        CHECK_STREQ(env_str(env, "NEURON_LOGICAL_NC_CONFIG"), "1");
        json_decref(env);
}

/* ---- NVML health through the fake library ---- */

static void fake_config(const char *path, const char *content) {
        touch(path, content);
}

static void test_nvml(const char *shared, const char *fakenvml) {
        hwloc_topology_t topo = topo_load(shared, "nvidia-dgx2-v100x16.xml");
        _cleanup_free_ char *root = dev_root_make("nvml", "nvidia", 16, -1);
        _cleanup_free_ char *conf = tmp_path("fakenvml.conf");
        _cleanup_free_ char *alias = tmp_path("alias/libnvidia-ml.so.1");
        AccelConfig cfg = {.dev_root = root,
                           .sys_root = root,
                           .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
        _cleanup_free_ AccelDevice *devs = NULL;
        char *reason = NULL;
        size_t n;

        /* No library: healthy, no NVML data, no crash. */
        n = detect(&accel_backend_nvidia, topo, &cfg, &devs);
        CHECK(n == 16);
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 0);
        CHECK(!reason);
        if (n != 16 || access(fakenvml, R_OK) < 0) {
                fprintf(stderr, "fake NVML library %s is missing\n", fakenvml);
                failures++;
                hwloc_topology_destroy(topo);
                return;
        }
        free(devs);

        setenv("FAKENVML_CONFIG", conf, 1);
        fake_config(conf, "0000:36:00.0 uuid=GPU-11111111-2222-3333-4444-555555555555\n");
        cfg.nvml_library = fakenvml;
        n = detect(&accel_backend_nvidia, topo, &cfg, &devs);
        CHECK(n == 16);
        CHECK(strncmp(devs[0].uuid, "GPU-", 4) == 0);
        CHECK_STREQ(devs[1].uuid, "GPU-11111111-2222-3333-4444-555555555555");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 0);

        fake_config(conf, "0000:34:00.0 ecc=3\n");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 1);
        CHECK_STREQ(reason, "nvidia 0000:34:00.0: 3 uncorrected ECC errors");
        free(reason);
        reason = NULL;

        fake_config(conf, "0000:36:00.0 lost\n0000:39:00.0 remap_pending\n");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 1);
        CHECK_STREQ(reason, "nvidia 0000:36:00.0: GPU lost (fallen off the bus); "
                            "nvidia 0000:39:00.0: row remapping pending (GPU reset required)");
        free(reason);
        reason = NULL;

        fake_config(conf, "0000:3b:00.0 retired_pending\n0000:57:00.0 missing\n"
                          "0000:59:00.0 remap_failure ecc=1\n");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 1);
        CHECK_STREQ(reason, "nvidia 0000:3b:00.0: retired pages pending (GPU reset required); "
                            "nvidia 0000:57:00.0: not found by NVML; "
                            "nvidia 0000:59:00.0: 1 uncorrected ECC error, row remapping failed");
        free(reason);
        reason = NULL;

        /* An application XID (13) is not the GPU's fault; 79 is, and it sticks. */
        fake_config(conf, "0000:5c:00.0 xid=13\n");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 0);
        fake_config(conf, "0000:e7:00.0 xid=79\n");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 1);
        CHECK_STREQ(reason, "nvidia 0000:e7:00.0: critical XID 79");
        free(reason);
        reason = NULL;
        fake_config(conf, "");
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 1);
        CHECK_STREQ(reason, "nvidia 0000:e7:00.0: critical XID 79");
        free(reason);
        reason = NULL;

        /* Only the devices asked about are judged. */
        CHECK(accel_backend_nvidia.health(devs, 8, &cfg, &reason) == 0);

        /* A driver that does not initialise is no data, as no library is. */
        fake_config(conf, "init=fail\n");
        touch(alias, "");
        CHECK(unlink(alias) == 0 && symlink(fakenvml, alias) == 0);
        cfg.nvml_library = alias;
        CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 0);
        CHECK(!reason);
        unsetenv("FAKENVML_CONFIG");
        hwloc_topology_destroy(topo);
}

/*
 * The H100 VM that scripts/gpu-check ran on (docs/TESTING.md, "Checked on a real H100"):
 * its hwloc export and the answers its driver gave (UUID; page retirement not
 * supported on Hopper, every other counter clean) make one healthy H100 SXM5 on the
 * root bus, between virtio devices of class ffff that are not GPUs.
 */
static void test_h100_vm(const char *shared, const char *fakenvml) {
        hwloc_topology_t topo = topo_load(shared, "nvidia-h100-vm.xml");
        _cleanup_free_ char *root = dev_root_make("h100-vm", "nvidia", 1, -1);
        _cleanup_free_ char *conf = tmp_path("fakenvml-h100-vm.conf");
        AccelConfig cfg = {.dev_root = root, .sys_root = root, .nvml_library = fakenvml};
        _cleanup_free_ AccelDevice *devs = NULL;
        char *reason = NULL;

        setenv("FAKENVML_CONFIG", conf, 1);
        fake_config(conf, "0000:00:06.0 uuid=GPU-8818c3c2-41a2-2428-a37f-65602e189ec8 "
                          "retired_unsupported\n");
        size_t n = detect(&accel_backend_nvidia, topo, &cfg, &devs);
        CHECK(n == 1);
        if (n == 1) {
                CHECK_STREQ(devs[0].kind, "nvidia-h100");
                CHECK_STREQ(devs[0].model, "H100 SXM5 80GB");
                CHECK_STREQ(devs[0].pci_bus_id, "0000:00:06.0");
                CHECK_STREQ(devs[0].uuid, "GPU-8818c3c2-41a2-2428-a37f-65602e189ec8");
                CHECK(devs[0].vendor_index == 0);
                /* One NUMA node (nvidia-smi topo -m: affinity 0), no PCIe switch. */
                CHECK(devs[0].numa_node == 0);
                CHECK(devs[0].pcie_switch == -1);
                CHECK(accel_backend_nvidia.health(devs, n, &cfg, &reason) == 0);
                CHECK(!reason);
        }
        unsetenv("FAKENVML_CONFIG");
        hwloc_topology_destroy(topo);
}

int main(void) {
        const char *topologies = getenv("TOPOLOGIES_DIR");
        const char *shared = getenv("SHARED_TOPOLOGIES_DIR");
        const char *fakenvml = getenv("FAKENVML_LIBRARY");
        const char *profiles = getenv("PROFILES_DIR");

        if (!topologies || !shared || !fakenvml || !profiles) {
                fprintf(stderr, "TOPOLOGIES_DIR, SHARED_TOPOLOGIES_DIR, FAKENVML_LIBRARY and "
                                "PROFILES_DIR must be set (meson test does)\n");
                return 77;
        }
        if (!mkdtemp(tmp_root)) {
                perror("mkdtemp");
                return EXIT_FAILURE;
        }

        test_dgx2(shared);
        test_power8(shared);
        test_h100(topologies);
        test_tpu(topologies);
        test_trn2(topologies);
        test_env_nvidia();
        test_env_tpu();
        test_env_neuron();
        test_profiles(profiles);
        test_nvml(shared, fakenvml);
        test_h100_vm(shared, fakenvml);

        util_rm_rf(tmp_root);
        if (failures) {
                fprintf(stderr, "%d check(s) failed\n", failures);
                return EXIT_FAILURE;
        }
        printf("all accel checks passed\n");
        return EXIT_SUCCESS;
}
