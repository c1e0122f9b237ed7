/* memory.c: device memory as tensors hold it: every tensor's block goes through here, so that
** each device counts what is allocated (and its peak) whatever its backend, and the backend's
** cache of freed blocks (sim: sim_blocks.c) says what is reserved. */
#include "internal.h"

#include <stdlib.h>

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
    tocha_memory_counters *m = &d->memory;
    if (d->capturing) {
        if (m->n_deferred + 2 > m->cap_deferred) {
            size_t cap = m->cap_deferred ? 2 * m->cap_deferred : 32;
            uint64_t *grown = realloc(m->deferred, cap * sizeof *grown);
            if (grown) m->deferred = grown, m->cap_deferred = cap;
        }
        if (m->n_deferred + 2 <= m->cap_deferred) {
            m->deferred[m->n_deferred++] = ptr;
            m->deferred[m->n_deferred++] = nbytes;
            return;
        }
        /* No host memory to keep it: give it back now, as without a capture. */
    }
    d->backend->release(d, ptr, nbytes);
    atomic_fetch_sub(&m->allocated, nbytes);
    atomic_fetch_add(&m->frees, 1);
}

void tocha_memory_release_deferred(tocha_device *d)
{
    tocha_memory_counters *m = &d->memory;
    size_t n = m->n_deferred;
    m->n_deferred = 0;
    for (size_t i = 0; i + 1 < n; i += 2) tocha_memory_release(d, m->deferred[i], m->deferred[i + 1]);
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
    /* Emptying waits for the device (cuda), which a capture cannot record. */
    int st = tocha_refuse_during_capture(d, "empty the memory cache");
    if (st) return st;
    d->backend->empty_cache(d);
    return TOCHA_OK;
}

int tocha_memory_reset_peak(tocha_device *d)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    atomic_store(&d->memory.peak, atomic_load(&d->memory.allocated));
    return TOCHA_OK;
}
