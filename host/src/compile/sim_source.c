/*
** sim_source.c: the one rewrite the simulator makes to a kernel's source. CUDA's dynamic shared
** memory, `extern __shared__ T name[];`, names an array whose storage the launch gives; the host
** compiler has no such thing, so each such declaration becomes a pointer of the same name to
** the simulator's dynamic shared memory (kernels/sim/tocha_sim.h), on the same line, so that
** the source's line numbers stay as they were. Everything else compiles as written.
*/
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* The length of the word at p that equals word, or 0. */
static size_t word_at(const char *p, const char *word)
{
    size_t n = strlen(word);
    return strncmp(p, word, n) == 0 && !word_char(p[n]) ? n : 0;
}

/* Skips a comment or a string or character literal at p; returns where it ends, or p when none
** starts there. */
static const char *skip_literal(const char *p)
{
    if (p[0] == '/' && p[1] == '/') {
        const char *e = strchr(p, '\n');
        return e ? e : p + strlen(p);
    }
    if (p[0] == '/' && p[1] == '*') {
        const char *e = strstr(p + 2, "*/");
        return e ? e + 2 : p + strlen(p);
    }
    if (*p == '"' || *p == '\'') {
        const char quote = *p;
        const char *e = p + 1;
        while (*e && *e != quote && *e != '\n') e += e[0] == '\\' && e[1] ? 2 : 1;
        return *e == quote ? e + 1 : e;
    }
    return p;
}

/* Appends the declaration's type, [from, to), without alignment specifiers (__align__(n),
** alignas(n), __attribute__((...))), which a pointer's cast cannot hold. */
static void append_type(tocha_text *t, const char *from, const char *to)
{
    const char *p = from;
    while (p < to) {
        size_t n = word_at(p, "__align__");
        if (!n) n = word_at(p, "alignas");
        if (!n) n = word_at(p, "__attribute__");
        if (n) {
            const char *q = p + n;
            while (q < to && isspace((unsigned char)*q)) q++;
            if (q < to && *q == '(') {
                int depth = 0;
                for (; q < to; q++) {
                    if (*q == '(') depth++;
                    if (*q == ')' && --depth == 0) break;
                }
                p = q < to ? q + 1 : to;
                continue;
            }
        }
        const char c = *p++;
        tocha_text_appendf(t, "%c", c == '\n' ? ' ' : c);
    }
}

/* Rewrites the declaration `extern __shared__ <type> <name> [ ] ;` that starts at p (end at
** its ';'), or returns false, leaving it as written, when it is not of that form. */
static bool rewrite_declaration(tocha_text *t, const char *type_start, const char *semicolon)
{
    const char *close = semicolon;
    while (close > type_start && isspace((unsigned char)close[-1])) close--;
    if (close == type_start || close[-1] != ']') return false;
    const char *open = close - 1;
    while (open > type_start && isspace((unsigned char)open[-1])) open--;
    if (open == type_start || open[-1] != '[') return false;
    const char *name_end = open - 1;
    while (name_end > type_start && isspace((unsigned char)name_end[-1])) name_end--;
    const char *name = name_end;
    while (name > type_start && word_char(name[-1])) name--;
    if (name == name_end || isdigit((unsigned char)*name) || name == type_start) return false;
    tocha_text_append(t, "static thread_local ");
    append_type(t, type_start, name);
    tocha_text_append(t, "*const ");
    tocha_text_appendf(t, "%.*s", (int)(name_end - name), name);
    tocha_text_append(t, " = (");
    append_type(t, type_start, name);
    tocha_text_append(t, "*)tocha_sim::dynamic_shared_memory();");
    for (const char *p = type_start; p < semicolon; p++)
        if (*p == '\n') tocha_text_append(t, "\n"); /* the lines the declaration spanned */
    return true;
}

char *tocha_sim_rewrite_source(const char *source)
{
    tocha_text t = {0};
    const char *p = source, *copied = source;
    while (*p) {
        const char *after = skip_literal(p);
        if (after != p) {
            p = after;
            continue;
        }
        size_t n = (p == source || !word_char(p[-1])) ? word_at(p, "extern") : 0;
        if (n) {
            const char *q = p + n;
            while (isspace((unsigned char)*q)) q++;
            size_t s = word_at(q, "__shared__");
            const char *semicolon = s ? strchr(q + s, ';') : NULL;
            if (semicolon) {
                tocha_text_appendf(&t, "%.*s", (int)(p - copied), copied);
                if (rewrite_declaration(&t, q + s, semicolon)) {
                    p = copied = semicolon + 1;
                    continue;
                }
                copied = p;
            }
        }
        p++;
    }
    tocha_text_append(&t, copied);
    return tocha_text_take(&t);
}
