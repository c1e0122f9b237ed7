/*
** device.c: the process's devices and the choice of the default one.
** Devices are found once: every usable GPU (cuda:0..) and the simulator (sim). The default is
** TOCHA_DEVICE when set, else cuda:0 when a GPU is usable, else sim; the reason is kept so that
** the banner and `tocha info` can say why.
*/
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tocha_device devices[TOCHA_MAX_DEVICES];
static int device_count, gpu_count;
static const char *cuda_why = "";
static char default_reason[384];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void discover(void)
{
    const char *why = NULL;
    gpu_count = tocha_cuda_discover(devices, TOCHA_MAX_DEVICES - 1, 0, &why);
    if (gpu_count == 0 && why) cuda_why = why;
    tocha_sim_init(&devices[gpu_count], gpu_count);
    device_count = gpu_count + 1;
}

int tocha_devices_init(void)
{
    pthread_once(&once, discover);
    return TOCHA_OK;
}

const char *tocha_cuda_unavailable_reason(void)
{
    tocha_devices_init();
    return cuda_why;
}

int tocha_device_list(tocha_device **out, int cap, int *count)
{
    tocha_devices_init();
    for (int i = 0; i < device_count && i < cap; i++) out[i] = &devices[i];
    *count = device_count;
    return TOCHA_OK;
}

/* Resolves a device name; what names the source in messages ("device", "TOCHA_DEVICE"). */
static int lookup(const char *name, const char *what, tocha_device **out)
{
    tocha_devices_init();
    if (strcmp(name, "sim") == 0) {
        *out = &devices[gpu_count];
        return TOCHA_OK;
    }
    int ordinal = -1, used = 0;
    if (strcmp(name, "cuda") == 0)
        ordinal = 0;
    else if (sscanf(name, "cuda:%d%n", &ordinal, &used) != 1 || name[used] || ordinal < 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: unknown device '%s' (expected cuda, cuda:N or sim)",
                          what, name);
    if (gpu_count == 0)
        return tocha_fail(TOCHA_E_UNAVAILABLE, "%s: %s is unavailable here: %s", what, name, cuda_why);
    if (ordinal >= gpu_count)
        return tocha_fail(TOCHA_E_UNAVAILABLE,
                          "%s: %s does not exist (this machine has %d GPU%s: cuda:0%s)", what, name,
                          gpu_count, gpu_count == 1 ? "" : "s", gpu_count == 1 ? "" : " to cuda:N-1");
    *out = &devices[ordinal];
    return TOCHA_OK;
}

int tocha_device_default(tocha_device **out)
{
    tocha_devices_init();
    const char *env = getenv("TOCHA_DEVICE");
    if (env && *env) {
        int st = lookup(env, "TOCHA_DEVICE", out);
        if (st == TOCHA_OK)
            snprintf(default_reason, sizeof default_reason, "chosen by TOCHA_DEVICE=%s", env);
        return st;
    }
    if (gpu_count > 0) {
        *out = &devices[0];
        snprintf(default_reason, sizeof default_reason, "a usable GPU was found");
    } else {
        *out = &devices[gpu_count];
        snprintf(default_reason, sizeof default_reason, "no usable GPU: %s", cuda_why);
    }
    return TOCHA_OK;
}

const char *tocha_device_default_reason(void)
{
    tocha_device *d;
    if (!default_reason[0]) tocha_device_default(&d);
    return default_reason;
}

int tocha_device_get(const char *name, tocha_device **out)
{
    if (!name || !*name) return tocha_device_default(out);
    return lookup(name, "device", out);
}

int tocha_device_info_get(tocha_device *d, tocha_device_info *out)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", d->name);
    snprintf(out->product, sizeof out->product, "%s", d->product);
    snprintf(out->target, sizeof out->target, "%s", d->target);
    out->kind = d->kind;
    out->ordinal = d->ordinal;
    out->cc_major = d->cc_major;
    out->cc_minor = d->cc_minor;
    out->multiprocessors = d->multiprocessors;
    return d->backend->memory(d, &out->memory_free, &out->memory_total);
}

int tocha_device_synchronize(tocha_device *d)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    int st = tocha_refuse_during_capture(d, "synchronize");
    if (st) return st;
    return d->backend->synchronize(d);
}

int tocha_driver_version(int *out)
{
    tocha_devices_init();
    *out = tocha_cuda_driver_version();
    return TOCHA_OK;
}
