/*
** device.c: the process's devices and the choice of the default one.
** Devices are found once: every usable GPU (cuda:0..), then the simulator's devices: sim (also
** called sim:0), sim:1, ... up to TOCHA_SIM_DEVICES of them (2 unless set, at most 8), so that
** work spread over several devices runs on any machine. The default is TOCHA_DEVICE when set,
** else cuda:0 when a GPU is usable, else sim; the reason is kept so that the banner and
** `tocha info` can say why.
*/
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tocha_device devices[TOCHA_MAX_DEVICES];
static int device_count, gpu_count, sim_count;
static const char *cuda_why = "";
static char default_reason[384];
static char sim_count_error[160];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void discover(void)
{
    const char *why = NULL;
    gpu_count = tocha_cuda_discover(devices, TOCHA_MAX_DEVICES - TOCHA_MAX_SIM_DEVICES, 0, &why);
    if (gpu_count == 0 && why) cuda_why = why;
    /* A bad TOCHA_SIM_DEVICES leaves one sim device and an error every lookup reports. */
    sim_count = tocha_sim_device_count(sim_count_error, sizeof sim_count_error);
    for (int i = 0; i < sim_count; i++) tocha_sim_init(&devices[gpu_count + i], gpu_count + i, i, gpu_count);
    device_count = gpu_count + sim_count;
}

int tocha_devices_init(void)
{
    pthread_once(&once, discover);
    if (sim_count_error[0]) return tocha_fail(TOCHA_E_ARGUMENT, "%s", sim_count_error);
    return TOCHA_OK;
}

const char *tocha_cuda_unavailable_reason(void)
{
    tocha_devices_init();
    return cuda_why;
}

int tocha_device_list(tocha_device **out, int cap, int *count)
{
    int st = tocha_devices_init();
    if (st) return st;
    for (int i = 0; i < device_count && i < cap; i++) out[i] = &devices[i];
    *count = device_count;
    return TOCHA_OK;
}

/* Resolves a device name; what names the source in messages ("device", "TOCHA_DEVICE"). */
static int lookup(const char *name, const char *what, tocha_device **out)
{
    int st = tocha_devices_init();
    if (st) return st;
    int ordinal = -1, used = 0;
    if (strcmp(name, "sim") == 0 ||
        (sscanf(name, "sim:%d%n", &ordinal, &used) == 1 && !name[used] && ordinal >= 0)) {
        if (ordinal >= sim_count)
            return tocha_fail(TOCHA_E_UNAVAILABLE,
                              "%s: %s does not exist (this process has sim:0 to sim:%d; "
                              "TOCHA_SIM_DEVICES sets how many, at most %d)",
                              what, name, sim_count - 1, TOCHA_MAX_SIM_DEVICES);
        *out = &devices[gpu_count + (ordinal < 0 ? 0 : ordinal)];
        return TOCHA_OK;
    }
    ordinal = -1, used = 0;
    if (strcmp(name, "cuda") == 0)
        ordinal = 0;
    else if (sscanf(name, "cuda:%d%n", &ordinal, &used) != 1 || name[used] || ordinal < 0)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: unknown device '%s' (expected cuda, cuda:N, sim or sim:N)", what, name);
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
    int st = tocha_devices_init();
    if (st) return st;
    const char *env = getenv("TOCHA_DEVICE");
    if (env && *env) {
        st = lookup(env, "TOCHA_DEVICE", out);
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
