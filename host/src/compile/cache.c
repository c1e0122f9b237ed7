/*
** cache.c: the kernel cache, in this process's memory and on disk.
** The key is XXH3-128 over the schema version, tocha's version, the compiler's identity,
** version and options, the target, the full translation unit and the kernel's own options; compiler output is never
** hashed into a key. A disk entry is a header (magic, schema, key, payload size, XXH3-128 of
** the payload) and the payload; it is written to a temporary file and renamed into place, and
** one that is short, corrupt, foreign or fails to load is deleted and rebuilt.
*/
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define SCHEMA_VERSION 1
#define ENTRY_SUFFIX ".tkc"
static const char MAGIC[8] = {'T', 'O', 'C', 'H', 'A', 'K', 'C', '1'};

typedef struct {
    char magic[8];
    uint32_t schema;
    uint32_t header_size;
    unsigned char key[16];
    uint64_t payload_size;
    unsigned char payload_hash[16];
} entry_header;

struct tocha_cache_entry {
    unsigned char key[16];
    char hex[33];
    char target[32];
    void *binary;
    uint64_t size;
    bool from_disk;
    void *modules[TOCHA_MAX_DEVICES];
    void *functions[TOCHA_MAX_DEVICES];
    tocha_cache_entry *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tocha_cache_entry *entries;
static tocha_cache_stats stats;
static pthread_once_t dir_once = PTHREAD_ONCE_INIT;
/* A folder path up to the system's limit; paths in it add a slash and a name (at most 255 bytes). */
#define DIR_BYTES 4096
#define ENTRY_PATH_BYTES (DIR_BYTES + 256)
static char cache_dir[DIR_BYTES];
static char cache_warning[DIR_BYTES + 200];

/* ---- the folder ---- */

/* mkdir -p with mode 0700 for what it creates. */
static bool make_dirs(const char *path)
{
    char buf[DIR_BYTES];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST;
}

static void find_dir(void)
{
    const char *off = getenv("TOCHA_CACHE");
    if (off && strcmp(off, "off") == 0) return;
    if (off && *off && strcmp(off, "on") != 0)
        snprintf(cache_warning, sizeof cache_warning,
                 "TOCHA_CACHE: unknown value '%.60s' (expected on or off): the disk cache stays on",
                 off);
    const char *dir = getenv("TOCHA_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int length;
    if (dir && *dir)
        length = snprintf(cache_dir, sizeof cache_dir, "%s", dir);
    else if (xdg && *xdg)
        length = snprintf(cache_dir, sizeof cache_dir, "%s/tocha", xdg);
    else if (home && *home)
        length = snprintf(cache_dir, sizeof cache_dir, "%s/.cache/tocha", home);
    else
        return;
    struct stat st;
    const char *why = NULL;
    char too_long[64];
    if (length < 0 || (size_t)length >= sizeof cache_dir) {
        /* Never a shorter path than the one asked for: that would be another folder. */
        snprintf(too_long, sizeof too_long, "its path is %d bytes, at most %d", length,
                 (int)sizeof cache_dir - 1);
        why = too_long;
    } else if (!make_dirs(cache_dir))
        why = strerror(errno);
    else if (stat(cache_dir, &st) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a folder";
    else if (access(cache_dir, W_OK) != 0)
        why = "not writable";
    if (why) {
        /* Unusable: work from memory alone, and leave a word for the caller to show. */
        snprintf(cache_warning, sizeof cache_warning,
                 "kernel cache folder %.4095s%s is unusable (%s): compiling without a disk cache",
                 cache_dir, why == too_long ? "..." : "", why);
        cache_dir[0] = '\0';
    }
}

const char *tocha_cache_warning(void)
{
    pthread_once(&dir_once, find_dir);
    return cache_warning;
}

const char *tocha_cache_dir(void)
{
    pthread_once(&dir_once, find_dir);
    return cache_dir;
}

/* ---- keys ---- */

/* The options are hashed one by one after a count, so that ["-DA B"] and ["-DA", "B"] differ. */
static void compute_key(const char *unit, const char *target, const char *fingerprint,
                        const tocha_options *options, unsigned char key[16])
{
    XXH3_state_t *state = XXH3_createState();
    char head[64];
    snprintf(head, sizeof head, "tocha-kernel-cache schema %d", SCHEMA_VERSION);
    const char *parts[] = {head, tocha_version(), fingerprint, target, unit};
    XXH3_128bits_reset(state);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        XXH3_128bits_update(state, parts[i], strlen(parts[i]) + 1); /* NUL separates parts */
    char count[32];
    snprintf(count, sizeof count, "options %d", options ? options->count : 0);
    XXH3_128bits_update(state, count, strlen(count) + 1);
    for (int i = 0; options && i < options->count; i++)
        XXH3_128bits_update(state, options->items[i], strlen(options->items[i]) + 1);
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(state));
    XXH3_freeState(state);
    memcpy(key, canon.digest, 16);
}

static void hash_payload(const void *data, uint64_t size, unsigned char out[16])
{
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits(data, size));
    memcpy(out, canon.digest, 16);
}

static void to_hex(const unsigned char *bytes, int n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

static void entry_path(const char *hex, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s" ENTRY_SUFFIX, cache_dir, hex);
}

/* ---- disk ---- */

int tocha_cache_parse_entry(const unsigned char *data, uint64_t size, const unsigned char key[16],
                            uint64_t *payload_offset, uint64_t *payload_size)
{
    entry_header h;
    if (size < sizeof h) return -1;
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, MAGIC, 8) != 0 || h.schema != SCHEMA_VERSION || h.header_size != sizeof h ||
        memcmp(h.key, key, 16) != 0 || h.payload_size != size - sizeof h)
        return -1;
    unsigned char check[16];
    hash_payload(data + sizeof h, h.payload_size, check);
    if (memcmp(check, h.payload_hash, 16) != 0) return -1;
    *payload_offset = sizeof h;
    *payload_size = h.payload_size;
    return 0;
}

/* No entry is larger than this: a bigger file is not one of ours. */
#define MAX_ENTRY_BYTES ((uint64_t)1 << 30)

/* The payload of a valid entry (malloc'd), or NULL; a bad entry is deleted. Only a regular
** file owned by this user is read, and a link is never followed. */
static void *disk_read(const unsigned char key[16], const char *hex, uint64_t *size)
{
    char path[ENTRY_PATH_BYTES];
    entry_path(hex, path, sizeof path);
    /* O_NONBLOCK: a FIFO planted at the name would block the open until a writer came. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st = {0};
    unsigned char *data = NULL;
    uint64_t got = 0, offset = 0, payload = 0;
    bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    if (ours && (uint64_t)st.st_size <= MAX_ENTRY_BYTES) {
        data = malloc(st.st_size ? (size_t)st.st_size : 1);
        while (data && got < (uint64_t)st.st_size) {
            ssize_t n = read(fd, data + got, (uint64_t)st.st_size - got);
            if (n <= 0) break;
            got += (uint64_t)n;
        }
    }
    close(fd);
    bool valid = data && got == (uint64_t)st.st_size &&
                 tocha_cache_parse_entry(data, got, key, &offset, &payload) == 0;
    if (!valid) {
        free(data);
        if (ours) unlink(path); /* another user's file is left alone, and not loaded */
        stats.disk_rejects++;
        return NULL;
    }
    memmove(data, data + offset, payload);
    *size = payload;
    return data;
}

static bool write_all(int fd, const void *data, uint64_t size)
{
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n <= 0) return false;
        p += n;
        size -= (uint64_t)n;
    }
    return true;
}

/* Best effort: a cache that cannot be written only costs a compile next time. */
static void disk_write(const unsigned char key[16], const char *hex, const void *payload, uint64_t size)
{
    char tmp[ENTRY_PATH_BYTES], path[ENTRY_PATH_BYTES];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", cache_dir, hex);
    entry_path(hex, path, sizeof path);
    struct stat existing;
    if (lstat(path, &existing) == 0 && existing.st_uid != geteuid()) return; /* not ours to replace */
    int fd = mkstemp(tmp); /* O_EXCL: never follows a planted link; rename replaces a link itself */
    if (fd < 0) return;
    entry_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.schema = SCHEMA_VERSION;
    h.header_size = sizeof h;
    memcpy(h.key, key, 16);
    h.payload_size = size;
    hash_payload(payload, size, h.payload_hash);
    bool ok = write_all(fd, &h, sizeof h) && write_all(fd, payload, size);
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) == 0) {
        stats.disk_writes++;
        return;
    }
    unlink(tmp);
}

/* ---- the cache ---- */

static tocha_cache_entry *find(const unsigned char key[16])
{
    for (tocha_cache_entry *e = entries; e; e = e->next)
        if (memcmp(e->key, key, 16) == 0) return e;
    return NULL;
}

/* Compiles (or reads from disk) into e->binary. Called with the lock held. */
static int fill(tocha_cache_entry *e, const char *unit, const tocha_options *options, bool use_disk)
{
    if (use_disk && cache_dir[0]) {
        e->binary = disk_read(e->key, e->hex, &e->size);
        if (e->binary) {
            stats.disk_hits++;
            e->from_disk = true;
            return TOCHA_OK;
        }
    }
    int st = tocha_compile_unit(unit, e->target, options, &e->binary, &e->size);
    if (st) return st;
    stats.compiles++;
    e->from_disk = false;
    if (cache_dir[0]) disk_write(e->key, e->hex, e->binary, e->size);
    return TOCHA_OK;
}

int tocha_cache_build(const char *unit, const char *target, const tocha_options *options,
                      tocha_cache_entry **out)
{
    const char *fingerprint;
    int st = tocha_compiler_fingerprint(target, &fingerprint);
    if (st) return st;
    unsigned char key[16];
    compute_key(unit, target, fingerprint, options, key);
    pthread_once(&dir_once, find_dir);
    pthread_mutex_lock(&lock);
    tocha_cache_entry *e = find(key);
    if (e) {
        stats.memory_hits++;
        pthread_mutex_unlock(&lock);
        *out = e;
        return TOCHA_OK;
    }
    e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&lock);
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a cache entry");
    }
    memcpy(e->key, key, 16);
    to_hex(key, 16, e->hex);
    snprintf(e->target, sizeof e->target, "%s", target);
    st = fill(e, unit, options, true);
    if (st) {
        free(e);
        pthread_mutex_unlock(&lock);
        return st;
    }
    e->next = entries;
    entries = e;
    pthread_mutex_unlock(&lock);
    *out = e;
    return TOCHA_OK;
}

uint64_t tocha_cache_entry_size(const tocha_cache_entry *e) { return e->size; }
const void *tocha_cache_entry_binary(const tocha_cache_entry *e) { return e->binary; }

int tocha_cache_entry_function(tocha_cache_entry *e, tocha_device *d, const char *unit,
                               const tocha_options *options, const char *entry, void **function)
{
    pthread_mutex_lock(&lock);
    int st = TOCHA_OK;
    if (!e->functions[d->load_slot]) {
        st = d->backend->load(d, e->binary, e->size, entry, &e->modules[d->load_slot],
                              &e->functions[d->load_slot]);
        if (st && e->from_disk) {
            /* An entry that passed its checks but will not load is rebuilt from source. */
            char path[ENTRY_PATH_BYTES];
            entry_path(e->hex, path, sizeof path);
            unlink(path);
            stats.disk_rejects++;
            free(e->binary);
            e->binary = NULL;
            st = fill(e, unit, options, false);
            if (!st)
                st = d->backend->load(d, e->binary, e->size, entry, &e->modules[d->load_slot],
                                      &e->functions[d->load_slot]);
        }
    }
    *function = e->functions[d->load_slot];
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---- the ABI ---- */

int tocha_cache_stats_get(tocha_cache_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
    return TOCHA_OK;
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* The names the cache writes: "<32 hex digits>.tkc" entries and the ".tmp-<32 hex>-XXXXXX"
** temporaries of disk_write; nothing else in the folder is the cache's to count or remove. */
static bool is_entry_name(const char *name)
{
    size_t n = strlen(name), s = strlen(ENTRY_SUFFIX);
    if (n == 32 + s) return is_hex(name, 32) && strcmp(name + 32, ENTRY_SUFFIX) == 0;
    return n == 5 + 32 + 7 && strncmp(name, ".tmp-", 5) == 0 && is_hex(name + 5, 32) && name[37] == '-';
}

/* Visits the cache's own files (entries and stale temporaries). */
static int walk(bool remove, int64_t *count, int64_t *bytes)
{
    *count = 0;
    if (bytes) *bytes = 0;
    pthread_once(&dir_once, find_dir);
    if (!cache_dir[0]) return TOCHA_OK;
    DIR *dir = opendir(cache_dir);
    if (!dir) return tocha_fail(TOCHA_E_IO, "cache folder %s: %s", cache_dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (!is_entry_name(de->d_name)) continue;
        char path[ENTRY_PATH_BYTES];
        snprintf(path, sizeof path, "%s/%s", cache_dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (remove && unlink(path) != 0) continue;
        (*count)++;
        if (bytes) *bytes += st.st_size;
    }
    closedir(dir);
    return TOCHA_OK;
}

int tocha_cache_usage(int64_t *count, int64_t *bytes) { return walk(false, count, bytes); }

/* Removes tocha.autotune's records (the .txt files in <cache>/autotune): they hold choices
** measured with the kernels the cache holds. Returns how many. */
static int64_t clear_autotune_records(void)
{
    char folder[ENTRY_PATH_BYTES];
    snprintf(folder, sizeof folder, "%s/autotune", cache_dir);
    DIR *dir = opendir(folder);
    if (!dir) return 0;
    int64_t n = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".txt") != 0) continue;
        char path[ENTRY_PATH_BYTES + 256];
        snprintf(path, sizeof path, "%s/%s", folder, de->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && unlink(path) == 0) n++;
    }
    closedir(dir);
    return n;
}

int tocha_cache_clear(int64_t *removed)
{
    int64_t n = 0;
    int st = walk(true, &n, NULL);
    if (!st && cache_dir[0]) n += clear_autotune_records();
    if (removed) *removed = n;
    return st;
}
