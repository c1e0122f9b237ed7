/* text.c: a growable string for generated source, logs and paths. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static bool reserve(tocha_text *t, size_t extra)
{
    if (t->failed) return false;
    if (t->len + extra + 1 <= t->cap) return true;
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + extra + 1) cap *= 2;
    char *grown = realloc(t->data, cap);
    if (!grown) {
        t->failed = true;
        return false;
    }
    t->data = grown;
    t->cap = cap;
    return true;
}

void tocha_text_append(tocha_text *t, const char *s)
{
    size_t n = strlen(s);
    if (!reserve(t, n)) return;
    memcpy(t->data + t->len, s, n + 1);
    t->len += n;
}

void tocha_text_appendf(tocha_text *t, const char *fmt, ...)
{
    va_list ap, copy;
    va_start(ap, fmt);
    va_copy(copy, ap);
    int need = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (need >= 0 && reserve(t, (size_t)need)) {
        vsnprintf(t->data + t->len, (size_t)need + 1, fmt, ap);
        t->len += (size_t)need;
    }
    va_end(ap);
}

char *tocha_text_take(tocha_text *t)
{
    char *s = t->failed ? NULL : t->data;
    if (t->failed) free(t->data);
    if (!t->failed && !s) s = tocha_strdup("");
    *t = (tocha_text){0};
    return s;
}

char *tocha_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, s, n);
    return copy;
}

void tocha_text_append_numbered(tocha_text *t, const char *source)
{
    int line = 1;
    const char *p = source;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        tocha_text_appendf(t, "%5d | %.*s\n", line++, (int)n, p);
        p += n + (end ? 1 : 0);
    }
}

void tocha_format_dims(const int64_t *dims, int ndim, const char *sep, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%lld", i ? sep : "", (long long)dims[i]);
}

void tocha_join_words(const char *const *words, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    if (cap) out[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "", words[i]);
}

void tocha_hash_hex(const void *data, uint64_t size, char out[33])
{
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits(data, (size_t)size));
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[canon.digest[i] >> 4];
        out[2 * i + 1] = digits[canon.digest[i] & 15];
    }
    out[32] = '\0';
}
