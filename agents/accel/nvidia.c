/* SPDX-License-Identifier: MIT */
/*
 * The NVIDIA backend. Detection matches PCI vendor 0x10de with display or 3D class
 * (NVSwitches share the vendor but are class 0x0680 bridges, and are left out) against
 * a table of data-centre GPUs, and needs /dev/nvidia<N> to exist. Ranks see their GPUs
 * through CUDA_VISIBLE_DEVICES in PCI bus order. Health comes from NVML, opened with
 * dlopen() at run time so the agent neither needs the driver to build nor to run: no
 * library means no NVML data and a healthy verdict. NVML's header is not packaged on
 * Debian, so the few types and constants used are declared here, checked against the
 * public nvml.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "pci.h"
#include "util.h"

extern const AccelBackend accel_backend_nvidia;

/* ---- NVML, as declared by nvml.h (R450 and later) ---- */

typedef int NvmlReturn;
typedef struct nvmlDevice_st *NvmlDevice;
typedef struct nvmlEventSet_st *NvmlEventSet;

typedef struct NvmlMemory {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
} NvmlMemory;

/* nvmlEventData_t as nvmlEventSetWait_v2 fills it. */
typedef struct NvmlEventData {
        NvmlDevice device;
        unsigned long long event_type;
        unsigned long long event_data; /* the XID for nvmlEventTypeXidCriticalError */
        unsigned gpu_instance_id;
        unsigned compute_instance_id;
} NvmlEventData;

enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_TIMEOUT = 10,
        NVML_ERROR_GPU_IS_LOST = 15,
};

enum {
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, /* nvmlMemoryErrorType_t */
        NVML_VOLATILE_ECC = 0, /* nvmlEccCounterType_t: since the last driver load */
        NVML_FEATURE_ENABLED = 1, /* nvmlEnableState_t */
        NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
};

#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ULL

/*
 * XIDs that mean the GPU needs a reset or replacement, from NVIDIA's XID catalogue:
 * 48 double-bit ECC, 63/64 row remapping event/failure, 74 NVLink error, 79 fallen off
 * the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC error. Others
 * (13, 31, 43, ...) are usually the application's own faults and do not mark the node.
 */
static const unsigned long long nvidia_critical_xids[] = {48, 63, 64, 74, 79, 92, 94, 95};

/* ---- detection ---- */

/* Device IDs from the PCI ID repository (pci-ids.ucw.cz), vendor 10de. */
static const AccelPciModel nvidia_models[] = {
        {0x15f7, "nvidia-p100", "Tesla P100 PCIe 12GB", 0},
        {0x15f8, "nvidia-p100", "Tesla P100 PCIe 16GB", 0},
        {0x15f9, "nvidia-p100", "Tesla P100 SXM2 16GB", 0},
        {0x1db1, "nvidia-v100", "Tesla V100 SXM2 16GB", 0},
        {0x1db4, "nvidia-v100", "Tesla V100 PCIe 16GB", 0},
        {0x1db5, "nvidia-v100", "Tesla V100 SXM2 32GB", 0},
        {0x1db6, "nvidia-v100", "Tesla V100 PCIe 32GB", 0},
        {0x1db8, "nvidia-v100", "Tesla V100 SXM3 32GB", 0},
        {0x1df6, "nvidia-v100", "Tesla V100S PCIe 32GB", 0},
        {0x20b0, "nvidia-a100", "A100 SXM4 40GB", 0},
        {0x20b1, "nvidia-a100", "A100 PCIe 40GB", 0},
        {0x20b2, "nvidia-a100", "A100 SXM4 80GB", 0},
        {0x20b5, "nvidia-a100", "A100 PCIe 80GB", 0},
        {0x20f1, "nvidia-a100", "A100 PCIe 40GB", 0},
        {0x2321, "nvidia-h100", "H100 NVL 94GB", 0},
        {0x2330, "nvidia-h100", "H100 SXM5 80GB", 0},
        {0x2331, "nvidia-h100", "H100 PCIe 80GB", 0},
        {0x2339, "nvidia-h100", "H100 SXM5 94GB", 0},
        {0x2335, "nvidia-h200", "H200 SXM 141GB", 0},
        {0x233b, "nvidia-h200", "H200 NVL 141GB", 0},
};

/* VGA (0x0300) and 3D controller (0x0302); everything else of 10de is not a GPU. */
static const uint16_t nvidia_classes[] = {0x0300, 0x0302};

/*
 * /dev/nvidia<N> takes the driver's minor number, which follows PCI bus order on the
 * hosts we know; the same order is what CUDA_DEVICE_ORDER=PCI_BUS_ID numbers.
 */
static bool nvidia_node_find(const AccelDevice *dev, const AccelConfig *cfg, char *buf,
                             size_t size) {
        char path[32];

        snprintf(path, sizeof(path), "/dev/nvidia%d", dev->vendor_index);
        return accel_path_join(buf, size, cfg->dev_root, path) &&
               accel_path_exists(cfg->dev_root, path);
}

static const AccelPciMatch nvidia_match = {
        .vendor_id = 0x10de,
        .models = nvidia_models,
        .n_models = ELEMENTSOF(nvidia_models),
        .classes = nvidia_classes,
        .n_classes = ELEMENTSOF(nvidia_classes),
        /* CUDA counts every NVIDIA GPU, known to us or not, so unknown ones keep a slot. */
        .fallback_kind = "nvidia-gpu",
        .node_find = nvidia_node_find,
};

/* ---- NVML, loaded once and kept for the life of the agent ---- */

typedef struct NvidiaWatch {
        char bus_id[16];
        NvmlDevice handle;
        unsigned long long xid; /* last critical XID seen, 0 none; sticky until restart */
} NvidiaWatch;

typedef struct Nvml {
        void *dl;
        char *path; /* library this state belongs to */
        NvmlReturn (*init)(void);
        NvmlReturn (*shutdown)(void);
        NvmlReturn (*handle_by_bus_id)(const char *bus_id, NvmlDevice *ret);
        NvmlReturn (*get_uuid)(NvmlDevice dev, char *buf, unsigned size);
        NvmlReturn (*get_memory)(NvmlDevice dev, NvmlMemory *ret);
        NvmlReturn (*get_ecc)(NvmlDevice dev, int error_type, int counter_type,
                              unsigned long long *ret);
        NvmlReturn (*get_remapped)(NvmlDevice dev, unsigned *corrected, unsigned *uncorrected,
                                   unsigned *pending, unsigned *failure);
        NvmlReturn (*get_retired_pending)(NvmlDevice dev, int *ret_state);
        NvmlReturn (*event_set_create)(NvmlEventSet *ret);
        NvmlReturn (*register_events)(NvmlDevice dev, unsigned long long types, NvmlEventSet set);
        NvmlReturn (*event_wait)(NvmlEventSet set, NvmlEventData *ret, unsigned timeout_ms);
        NvmlReturn (*event_set_free)(NvmlEventSet set);
        NvmlEventSet events;
        NvidiaWatch *watches;
        size_t n_watches;
} Nvml;

static pthread_mutex_t nvml_lock = PTHREAD_MUTEX_INITIALIZER;
static Nvml nvml;

static void nvml_unload(void) {
        if (nvml.events && nvml.event_set_free)
                nvml.event_set_free(nvml.events);
        if (nvml.dl) {
                if (nvml.shutdown)
                        nvml.shutdown();
                dlclose(nvml.dl);
        }
        free(nvml.path);
        free(nvml.watches);
        memset(&nvml, 0, sizeof(nvml));
}

#define NVML_SYM(field, name) (*(void **) &nvml.field = dlsym(nvml.dl, name))

/*
 * Makes nvml usable for library; true when it is. Called with nvml_lock held. A
 * missing library or a driver that does not initialise leaves nothing loaded, and the
 * next call tries again, so a driver installed later is picked up.
 */
static bool nvml_open(const char *library) {
        if (nvml.dl && util_streq_ptr(nvml.path, library))
                return true;
        nvml_unload();

        nvml.dl = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!nvml.dl)
                return false;
        NVML_SYM(init, "nvmlInit_v2");
        NVML_SYM(shutdown, "nvmlShutdown");
        NVML_SYM(handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
        NVML_SYM(get_uuid, "nvmlDeviceGetUUID");
        NVML_SYM(get_memory, "nvmlDeviceGetMemoryInfo");
        NVML_SYM(get_ecc, "nvmlDeviceGetTotalEccErrors");
        NVML_SYM(get_remapped, "nvmlDeviceGetRemappedRows");
        NVML_SYM(get_retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
        NVML_SYM(event_set_create, "nvmlEventSetCreate");
        NVML_SYM(register_events, "nvmlDeviceRegisterEvents");
        NVML_SYM(event_wait, "nvmlEventSetWait_v2");
        NVML_SYM(event_set_free, "nvmlEventSetFree");
        if (!nvml.init || !nvml.handle_by_bus_id || nvml.init() != NVML_SUCCESS) {
                /* Not an NVML we can use; shutdown is only for a library that did init. */
                nvml.shutdown = NULL;
                nvml_unload();
                return false;
        }
        nvml.path = xstrdup(library);
        if (nvml.event_set_create && nvml.register_events && nvml.event_wait &&
            nvml.event_set_create(&nvml.events) != NVML_SUCCESS)
                nvml.events = NULL;
        return true;
}

static const char *nvml_library(const AccelConfig *cfg) {
        return cfg && cfg->nvml_library && *cfg->nvml_library ? cfg->nvml_library
                                                              : "libnvidia-ml.so.1";
}

static NvidiaWatch *nvml_watch_find(const char *bus_id) {
        for (size_t i = 0; i < nvml.n_watches; i++)
                if (strcmp(nvml.watches[i].bus_id, bus_id) == 0)
                        return &nvml.watches[i];
        return NULL;
}

/*
 * XID events only reach an event set registered before they happen, so every device is
 * registered the first time it is probed and the set lives as long as the agent.
 */
static void nvml_watch_add(const char *bus_id, NvmlDevice handle) {
        NvidiaWatch *w = nvml_watch_find(bus_id);

        if (w) {
                w->handle = handle;
                return;
        }
        if (nvml.events && nvml.register_events(handle, NVML_EVENT_TYPE_XID_CRITICAL_ERROR,
                                                nvml.events) != NVML_SUCCESS)
                return; /* XID events not supported on this device */
        nvml.watches = xrealloc(nvml.watches, (nvml.n_watches + 1) * sizeof(*nvml.watches));
        w = &nvml.watches[nvml.n_watches++];
        memset(w, 0, sizeof(*w));
        snprintf(w->bus_id, sizeof(w->bus_id), "%s", bus_id);
        w->handle = handle;
}

static bool nvidia_xid_is_critical(unsigned long long xid) {
        for (size_t i = 0; i < ELEMENTSOF(nvidia_critical_xids); i++)
                if (nvidia_critical_xids[i] == xid)
                        return true;
        return false;
}

/* Takes every pending event without waiting and remembers critical XIDs per device. */
static void nvml_events_drain(void) {
        if (!nvml.events)
                return;
        /* Bounded so a device streaming events cannot hold the agent's loop. */
        for (int i = 0; i < 256; i++) {
                NvmlEventData ev = {0};

                if (nvml.event_wait(nvml.events, &ev, 0) != NVML_SUCCESS)
                        break;
                if (!(ev.event_type & NVML_EVENT_TYPE_XID_CRITICAL_ERROR) ||
                    !nvidia_xid_is_critical(ev.event_data))
                        continue;
                for (size_t j = 0; j < nvml.n_watches; j++)
                        if (nvml.watches[j].handle == ev.device)
                                nvml.watches[j].xid = ev.event_data;
        }
}

/* ---- backend ---- */

static int nvidia_detect(hwloc_topology_t topo, const AccelConfig *cfg, AccelDevice **devs,
                         size_t *n_devs) {
        size_t first = *n_devs;
        int r;

        r = accel_pci_detect(topo, cfg, &accel_backend_nvidia, &nvidia_match, devs, n_devs);
        if (r < 0 || *n_devs == first)
                return r;

        /* UUIDs are optional inventory detail: only when NVML is there to tell. */
        pthread_mutex_lock(&nvml_lock);
        if (nvml_open(nvml_library(cfg)) && nvml.get_uuid) {
                for (size_t i = first; i < *n_devs; i++) {
                        AccelDevice *d = &(*devs)[i];
                        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
                        NvmlDevice h;

                        if (nvml.handle_by_bus_id(d->pci_bus_id, &h) == NVML_SUCCESS &&
                            nvml.get_uuid(h, uuid, sizeof(uuid)) == NVML_SUCCESS)
                                snprintf(d->uuid, sizeof(d->uuid), "%.*s",
                                         (int) sizeof(d->uuid) - 1, uuid);
                }
        }
        pthread_mutex_unlock(&nvml_lock);
        return 0;
}

static int nvidia_devices_env(const AccelDevice *const *devs, size_t n, json_t *env) {
        _cleanup_free_ const AccelDevice **sorted = accel_devices_sort(devs, n);
        _cleanup_free_ char *list = xstrdup("");
        int r;

        /* An empty list hides every GPU, which is right for a rank given none. */
        for (size_t i = 0; i < n; i++)
                accel_str_append(&list, ",", "%d", sorted[i]->vendor_index);
        r = accel_env_set(env, "CUDA_VISIBLE_DEVICES", list);
        if (r < 0)
                return r;
        /* Without it CUDA numbers devices fastest-first and the indices above shift. */
        return accel_env_set(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
}

/* Returns what is wrong with one GPU, NULL when nothing is; free() it. */
static char *nvidia_device_probe(const AccelDevice *d) {
        char *p = NULL;
        NvmlDevice h;
        NvmlReturn r;

        r = nvml.handle_by_bus_id(d->pci_bus_id, &h);
        if (r == NVML_ERROR_GPU_IS_LOST) {
                accel_str_append(&p, ", ", "GPU lost (fallen off the bus)");
                return p;
        }
        if (r == NVML_ERROR_NOT_FOUND) {
                accel_str_append(&p, ", ", "not found by NVML");
                return p;
        }
        if (r != NVML_SUCCESS)
                return NULL; /* no data about this GPU; do not guess */

        nvml_watch_add(d->pci_bus_id, h);

        if (nvml.get_memory) {
                NvmlMemory mem;
                if (nvml.get_memory(h, &mem) == NVML_ERROR_GPU_IS_LOST) {
                        accel_str_append(&p, ", ", "GPU lost (fallen off the bus)");
                        return p;
                }
        }
        if (nvml.get_ecc) {
                unsigned long long ecc = 0;
                r = nvml.get_ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc);
                if (r == NVML_ERROR_GPU_IS_LOST) {
                        accel_str_append(&p, ", ", "GPU lost (fallen off the bus)");
                        return p;
                }
                if (r == NVML_SUCCESS && ecc > 0)
                        accel_str_append(&p, ", ", "%llu uncorrected ECC error%s", ecc,
                                         ecc == 1 ? "" : "s");
        }
        if (nvml.get_remapped) {
                unsigned corr = 0, unc = 0, pending = 0, failure = 0;
                if (nvml.get_remapped(h, &corr, &unc, &pending, &failure) == NVML_SUCCESS) {
                        if (failure)
                                accel_str_append(&p, ", ", "row remapping failed");
                        else if (pending)
                                accel_str_append(&p, ", ",
                                                 "row remapping pending (GPU reset required)");
                }
        }
        if (nvml.get_retired_pending) {
                int state = 0;
                if (nvml.get_retired_pending(h, &state) == NVML_SUCCESS &&
                    state == NVML_FEATURE_ENABLED)
                        accel_str_append(&p, ", ", "retired pages pending (GPU reset required)");
        }
        return p;
}

static int nvidia_health(const AccelDevice *devs, size_t n, const AccelConfig *cfg,
                         char **ret_reason) {
        char *reason = NULL;

        if (n == 0)
                return 0; /* nothing to ask NVML about: do not even load it */
        pthread_mutex_lock(&nvml_lock);
        if (!nvml_open(nvml_library(cfg))) {
                pthread_mutex_unlock(&nvml_lock);
                return 0; /* no NVML, no data: the device nodes were there at detection */
        }

        /* Probing registers each device for XID events from now on, then drain them. */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *problems = nvidia_device_probe(&devs[i]);
                if (problems)
                        accel_str_append(&reason, "; ", "nvidia %s: %s", devs[i].pci_bus_id,
                                         problems);
        }

        nvml_events_drain();
        for (size_t i = 0; i < n; i++) {
                NvidiaWatch *w = nvml_watch_find(devs[i].pci_bus_id);
                if (w && w->xid)
                        accel_str_append(&reason, "; ", "nvidia %s: critical XID %llu",
                                         devs[i].pci_bus_id, w->xid);
        }
        pthread_mutex_unlock(&nvml_lock);

        if (!reason)
                return 0;
        *ret_reason = reason;
        return 1;
}

const AccelBackend accel_backend_nvidia = {
        .name = "nvidia",
        .detect = nvidia_detect,
        .devices_env = nvidia_devices_env,
        .health = nvidia_health,
};
