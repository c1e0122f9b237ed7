/* memory.c: device memory as tensors hold it: every tensor's block goes through here, so that
** each device counts what is allocated (and its peak) whatever its backend, and the backend's
** cache of freed blocks (sim: sim_blocks.c) says what is reserved. */
#include "internal.h"

int tocha_memory_alloc(tocha_device *d, uint64_t nbytes, uint64_t *out)
{
    bool cached = false;
    int st = d->backend->alloc(d, nbytes, out, &cached);
    if (st) return st;
    tocha_memory_counters *m = &d->memory;
    unsigned long long now = atomic_fetch_add(&m->allocated, nbytes) + nbytes;
    unsigned long long peak = atomic_load(&m->peak);
    while (now > peak && !atomic_compare_exchange_weak(&m->peak, &peak, now)) {}
    atomic_fetch_add(&m->allocations, 1);
    if (cached) atomic_fetch_add(&m->cache_hits, 1);
    return TOCHA_OK;
}

void tocha_memory_release(tocha_device *d, uint64_t ptr, uint64_t nbytes)
{
    d->backend->release(d, ptr, nbytes);
    atomic_fetch_sub(&d->memory.allocated, nbytes);
    atomic_fetch_add(&d->memory.frees, 1);
}

int tocha_memory_stats_get(tocha_device *d, tocha_memory_stats *out)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a tocha_memory_stats, got NULL");
    const tocha_memory_counters *m = &d->memory;
    out->allocated_bytes = atomic_load(&m->allocated);
    out->peak_allocated_bytes = atomic_load(&m->peak);
    out->allocations = atomic_load(&m->allocations);
    out->frees = atomic_load(&m->frees);
    out->cache_hits = atomic_load(&m->cache_hits);
    d->backend->reserved(d, &out->reserved_bytes, &out->cached_bytes);
    return TOCHA_OK;
}

int tocha_memory_empty_cache(tocha_device *d)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    d->backend->empty_cache(d);
    return TOCHA_OK;
}

int tocha_memory_reset_peak(tocha_device *d)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    atomic_store(&d->memory.peak, atomic_load(&d->memory.allocated));
    return TOCHA_OK;
}
