/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for libnvidia-ml.so.1 so the NVIDIA backend's health probe can be tested
 * on machines without a GPU. It exports the NVML entry points agents/accel/nvidia.c
 * resolves, with the same ABI, and answers from a text file named by the environment
 * variable FAKENVML_CONFIG, read again on every call so a test can change the state of
 * a GPU between two probes. One line per GPU, '#' for comments:
 *
 *     0000:34:00.0 ecc=3            3 uncorrected volatile ECC errors
 *     0000:36:00.0 lost             every call returns NVML_ERROR_GPU_IS_LOST
 *     0000:39:00.0 xid=79           one XID 79 event once the GPU is registered
 *     0000:3b:00.0 remap_pending    row remapping pending (also remap_failure)
 *     0000:57:00.0 retired_pending  retired pages pending
 *     0000:00:06.0 retired_unsupported  page retirement NOT_SUPPORTED, as an H100
 *                                   answers (Hopper remaps rows instead)
 *     0000:59:00.0 missing          NVML does not know the GPU (NOT_FOUND)
 *     0000:5c:00.0 uuid=GPU-...     the UUID to report
 *     init=fail                     nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED
 *
 * A GPU not listed is healthy. Without FAKENVML_CONFIG every GPU is healthy.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct FakeDevice *nvmlDevice_t;
typedef struct FakeEventSet *nvmlEventSet_t;

typedef struct nvmlMemory_t {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlEventData_t {
        nvmlDevice_t device;
        unsigned long long eventType;
        unsigned long long eventData;
        unsigned int gpuInstanceId;
        unsigned int computeInstanceId;
} nvmlEventData_t;

enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_UNINITIALIZED = 1,
        NVML_ERROR_INVALID_ARGUMENT = 2,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_INSUFFICIENT_SIZE = 7,
        NVML_ERROR_DRIVER_NOT_LOADED = 9,
        NVML_ERROR_TIMEOUT = 10,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_MEMORY = 20,
};

#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ULL
#define FAKE_MAX_DEVICES 64

struct FakeDevice {
        char bus_id[16];
        char uuid[96];
        unsigned long long ecc;
        unsigned long long xid;
        unsigned long long xid_delivered; /* the XID last turned into an event */
        bool lost, missing, remap_pending, remap_failure, retired_pending, retired_unsupported;
        bool registered;
};

struct FakeEventSet {
        int unused;
};

/* The exported NVML API, declared here because no nvml.h is at hand. */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending);
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                 unsigned int timeout_ms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

static struct FakeDevice fake_devices[FAKE_MAX_DEVICES];
static size_t fake_n_devices;
static struct FakeEventSet fake_event_set;
static bool fake_initialized;
static bool fake_init_fail;

/* Canonical "dddd:bb:dd.f"; NVML also accepts the 8-digit domain form. */
static bool fake_bus_id_normalize(const char *in, char out[16]) {
        unsigned domain, bus, dev, fn;

        if (sscanf(in, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4 || domain > 0xffff ||
            bus > 0xff || dev > 0x1f || fn > 7)
                return false;
        snprintf(out, 16, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
        return true;
}

static struct FakeDevice *fake_device_get(const char *bus_id) {
        char canon[16];

        if (!fake_bus_id_normalize(bus_id, canon))
                return NULL;
        for (size_t i = 0; i < fake_n_devices; i++)
                if (strcmp(fake_devices[i].bus_id, canon) == 0)
                        return &fake_devices[i];
        if (fake_n_devices == FAKE_MAX_DEVICES)
                return NULL;
        struct FakeDevice *d = &fake_devices[fake_n_devices++];
        memset(d, 0, sizeof(*d));
        memcpy(d->bus_id, canon, sizeof(d->bus_id));
        return d;
}

static void fake_device_apply(struct FakeDevice *d, const char *tok) {
        if (strncmp(tok, "ecc=", 4) == 0)
                d->ecc = strtoull(tok + 4, NULL, 10);
        else if (strncmp(tok, "xid=", 4) == 0)
                d->xid = strtoull(tok + 4, NULL, 10);
        else if (strncmp(tok, "uuid=", 5) == 0)
                snprintf(d->uuid, sizeof(d->uuid), "%s", tok + 5);
        else if (strcmp(tok, "lost") == 0)
                d->lost = true;
        else if (strcmp(tok, "missing") == 0)
                d->missing = true;
        else if (strcmp(tok, "remap_pending") == 0)
                d->remap_pending = true;
        else if (strcmp(tok, "remap_failure") == 0)
                d->remap_failure = true;
        else if (strcmp(tok, "retired_pending") == 0)
                d->retired_pending = true;
        else if (strcmp(tok, "retired_unsupported") == 0)
                d->retired_unsupported = true;
}

/* Re-reads the configuration; device records (and the handles to them) stay put. */
static void fake_config_load(void) {
        const char *path = getenv("FAKENVML_CONFIG");
        char line[512];
        FILE *f;

        fake_init_fail = false;
        for (size_t i = 0; i < fake_n_devices; i++) {
                struct FakeDevice *d = &fake_devices[i];
                d->ecc = d->xid = 0;
                d->uuid[0] = '\0';
                d->lost = d->missing = d->remap_pending = false;
                d->remap_failure = d->retired_pending = d->retired_unsupported = false;
        }
        if (!path || !(f = fopen(path, "re")))
                return;
        while (fgets(line, sizeof(line), f)) {
                char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
                struct FakeDevice *d;

                if (!tok || tok[0] == '#')
                        continue;
                if (strcmp(tok, "init=fail") == 0) {
                        fake_init_fail = true;
                        continue;
                }
                d = fake_device_get(tok);
                if (!d)
                        continue;
                while ((tok = strtok_r(NULL, " \t\r\n", &save)))
                        fake_device_apply(d, tok);
        }
        fclose(f);
}

nvmlReturn_t nvmlInit_v2(void) {
        fake_config_load();
        if (fake_init_fail)
                return NVML_ERROR_DRIVER_NOT_LOADED;
        fake_initialized = true;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
        fake_initialized = false;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
        struct FakeDevice *d;

        if (!fake_initialized)
                return NVML_ERROR_UNINITIALIZED;
        if (!bus_id || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        fake_config_load();
        d = fake_device_get(bus_id);
        if (!d)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (d->missing)
                return NVML_ERROR_NOT_FOUND;
        if (d->lost)
                return NVML_ERROR_GPU_IS_LOST;
        *device = d;
        return NVML_SUCCESS;
}

/* Common entry checks of the per-device calls; reloads so state changes show up. */
static nvmlReturn_t fake_device_check(nvmlDevice_t device) {
        if (!fake_initialized)
                return NVML_ERROR_UNINITIALIZED;
        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        fake_config_load();
        return device->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
        nvmlReturn_t r = fake_device_check(device);
        char buf[96];
        unsigned domain, bus, dev, fn;

        if (r != NVML_SUCCESS)
                return r;
        if (device->uuid[0]) {
                snprintf(buf, sizeof(buf), "%s", device->uuid);
        } else {
                sscanf(device->bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
                snprintf(buf, sizeof(buf), "GPU-fa4e0000-0000-4000-8000-000%04x%02x%02x%x", domain,
                         bus, dev, fn);
        }
        if (!uuid || strlen(buf) + 1 > length)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(uuid, buf, strlen(buf) + 1);
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
        nvmlReturn_t r = fake_device_check(device);

        if (r != NVML_SUCCESS)
                return r;
        if (!memory)
                return NVML_ERROR_INVALID_ARGUMENT;
        memory->total = 80ULL << 30;
        memory->used = 1ULL << 30;
        memory->free = memory->total - memory->used;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count) {
        nvmlReturn_t r = fake_device_check(device);

        if (r != NVML_SUCCESS)
                return r;
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        /* Only uncorrected (1) volatile (0) errors are modelled. */
        *count = error_type == 1 && counter_type == 0 ? device->ecc : 0;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
        nvmlReturn_t r = fake_device_check(device);

        if (r != NVML_SUCCESS)
                return r;
        if (!corr || !unc || !pending || !failure)
                return NVML_ERROR_INVALID_ARGUMENT;
        *corr = 0;
        *unc = device->remap_pending || device->remap_failure ? 1 : 0;
        *pending = device->remap_pending;
        *failure = device->remap_failure;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending) {
        nvmlReturn_t r = fake_device_check(device);

        if (r != NVML_SUCCESS)
                return r;
        if (!pending)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (device->retired_unsupported)
                return NVML_ERROR_NOT_SUPPORTED;
        *pending = device->retired_pending ? 1 : 0;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
        if (!fake_initialized)
                return NVML_ERROR_UNINITIALIZED;
        if (!set)
                return NVML_ERROR_INVALID_ARGUMENT;
        *set = &fake_event_set;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
        nvmlReturn_t r = fake_device_check(device);

        if (r != NVML_SUCCESS)
                return r;
        if (set != &fake_event_set)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (types & NVML_EVENT_TYPE_XID_CRITICAL_ERROR)
                device->registered = true;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                 unsigned int timeout_ms) {
        if (!fake_initialized)
                return NVML_ERROR_UNINITIALIZED;
        if (set != &fake_event_set || !data)
                return NVML_ERROR_INVALID_ARGUMENT;
        fake_config_load();
        /* Like the driver: an XID reaches only sets registered for it, and only once. */
        for (size_t i = 0; i < fake_n_devices; i++) {
                struct FakeDevice *d = &fake_devices[i];
                if (!d->registered || d->xid == 0 || d->xid == d->xid_delivered)
                        continue;
                d->xid_delivered = d->xid;
                memset(data, 0, sizeof(*data));
                data->device = d;
                data->eventType = NVML_EVENT_TYPE_XID_CRITICAL_ERROR;
                data->eventData = d->xid;
                data->gpuInstanceId = 0xffffffffu;
                data->computeInstanceId = 0xffffffffu;
                return NVML_SUCCESS;
        }
        return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
        return set == &fake_event_set ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}
