/* SPDX-License-Identifier: MIT */
/*
 * The host backend. Host CPUs and memory are counted in the node inventory itself, not
 * listed as accelerators, so this backend finds no devices and gives ranks no
 * visibility variables. What it adds is a host health probe: memory controllers that
 * report uncorrectable ECC errors through EDAC (/sys/devices/system/edac/mc/mcN/ue_count)
 * make a node unfit for training: a bad DIMM crashes ranks at random or corrupts
 * their state silently, so the controller should stop placing work there.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "accel.h"
#include "pci.h"
#include "util.h"

static int cpu_detect(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **devs,
                      size_t *n_devs) {
        return 0;
}

static int cpu_devices_env(const AccelDevice *const *devs, size_t n, json_t *env) {
        return 0;
}

static int cpu_health(const AccelDevice *devs, size_t n, const AccelConfig *cfg,
                      char **ret_reason) {
        const char *root = cfg ? cfg->sys_root : NULL;
        static const char mc_dir[] = "/sys/devices/system/edac/mc";
        char dir[512];
        if (!accel_path_join(dir, sizeof(dir), root, mc_dir))
                return -ENAMETOOLONG;
        DIR *d = opendir(dir);
        if (!d)
                /* No EDAC driver (VMs, laptops): nothing to probe, not a failure. */
                return 0;

        char *reason = NULL;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, "mc", 2) != 0)
                        continue;
                _cleanup_free_ char *path = xasprintf("%s/%s/ue_count", mc_dir, de->d_name);
                unsigned long long ue;
                if (accel_read_counter(root, path, &ue) < 0 || ue == 0)
                        continue;
                accel_str_append(&reason, "; ", "host memory %s: %llu uncorrectable ECC errors",
                                 de->d_name, ue);
        }
        closedir(d);

        if (!reason)
                return 0;
        *ret_reason = reason;
        return 1;
}

const AccelBackend accel_backend_cpu = {
        .name = "cpu",
        .detect = cpu_detect,
        .devices_env = cpu_devices_env,
        .health = cpu_health,
};
