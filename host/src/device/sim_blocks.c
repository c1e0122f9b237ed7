/* sim_blocks.c: the simulator's cache of freed blocks, its counterpart of a CUDA memory pool
** that keeps freed memory for reuse. A freed tensor's mapping (sim_guard.c) is kept and given
** to the next allocation of the same mapped size, so that code which drops a tensor and
** allocates another pays no munmap and mmap (about 29 us a pair) and reuses the same pages.
** Only exact sizes are reused, so that a block still ends at its guard page. Each sim device has
** its own buckets (a block stays counted against the device that mapped it); together the
** caches hold at most a quarter of the host's memory, past which a freed block is unmapped at
** once. */
#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

enum { BUCKETS = 256 };

/* A cached block's first bytes link it into its bucket (the tensor it held is gone). */
typedef struct cached_block {
    struct cached_block *next;
} cached_block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cached_block *buckets[TOCHA_MAX_SIM_DEVICES][BUCKETS];
static uint64_t cached_bytes[TOCHA_MAX_SIM_DEVICES], cached_total;

static unsigned bucket_of(uint64_t rounded)
{
    return (unsigned)((rounded >> 8) * 0x9E3779B97F4A7C15ull >> 56);
}

static uint64_t cache_cap(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 4 : (uint64_t)1 << 30;
}

void *tocha_sim_blocks_take(int device, uint64_t rounded)
{
    pthread_mutex_lock(&lock);
    cached_block **at = &buckets[device][bucket_of(rounded)];
    while (*at && tocha_sim_mapped_bytes(*at) != rounded) at = &(*at)->next;
    cached_block *b = *at;
    if (b) {
        *at = b->next;
        cached_bytes[device] -= rounded;
        cached_total -= rounded;
    }
    pthread_mutex_unlock(&lock);
    return b;
}

bool tocha_sim_blocks_put(int device, void *data)
{
    static uint64_t cap;
    uint64_t rounded = tocha_sim_mapped_bytes(data);
    pthread_mutex_lock(&lock);
    if (!cap) cap = cache_cap();
    bool kept = cached_total + rounded <= cap;
    if (kept) {
        cached_block *b = data;
        unsigned i = bucket_of(rounded);
        b->next = buckets[device][i];
        buckets[device][i] = b;
        cached_bytes[device] += rounded;
        cached_total += rounded;
    }
    pthread_mutex_unlock(&lock);
    return kept;
}

uint64_t tocha_sim_blocks_cached(int device)
{
    pthread_mutex_lock(&lock);
    uint64_t n = cached_bytes[device];
    pthread_mutex_unlock(&lock);
    return n;
}

uint64_t tocha_sim_blocks_empty(int device)
{
    pthread_mutex_lock(&lock);
    cached_block *all[BUCKETS];
    memcpy(all, buckets[device], sizeof all);
    memset(buckets[device], 0, sizeof all);
    uint64_t n = cached_bytes[device];
    cached_bytes[device] = 0;
    cached_total -= n;
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < BUCKETS; i++)
        for (cached_block *b = all[i], *next; b; b = next) {
            next = b->next;
            tocha_sim_unmap(b);
        }
    return n;
}
