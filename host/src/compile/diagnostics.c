/*
** diagnostics.c: a compile failure told in the kernel's own terms. The translation unit marks
** each part with a #line directive (the kernel's source under its file name, the generated
** entry point, tocha's prelude), so both compilers report the kernel's own lines; this file
** keeps the first errors of the log with their notes, drops the compilers' own excerpts of the
** unit, and shows three lines of the kernel's source around each error with a caret under its
** column. The whole log and unit go to TOCHA_DUMP_DIR when it is set.
*/
#include "internal.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

enum { SHOWN_ERRORS = 3, NOTES_PER_ERROR = 6 };

/* A diagnostic line of either compiler: g++'s "file:line:col: kind: text" (col 0 when absent)
** or NVRTC's "file(line): kind: text". */
typedef struct {
    char file[256];
    int line, col;
    char kind[32]; /* error, warning, note, catastrophic error, fatal error; "" for g++'s
                      "required from" lines */
    const char *text;
} diagnostic;

static bool parse_gcc(const char *s, diagnostic *d)
{
    const char *p = s;
    while (*p && *p != ':' && *p != '\n') p++;
    if (*p != ':' || p == s || (size_t)(p - s) >= sizeof d->file || !isdigit((unsigned char)p[1])) return false;
    memcpy(d->file, s, (size_t)(p - s));
    d->file[p - s] = '\0';
    char *end;
    d->line = (int)strtol(p + 1, &end, 10);
    d->col = 0;
    if (*end == ':' && isdigit((unsigned char)end[1])) d->col = (int)strtol(end + 1, &end, 10);
    if (*end != ':') return false;
    p = end + 1;
    while (*p == ' ') p++;
    d->kind[0] = '\0';
    static const char *const kinds[] = {"fatal error", "error", "warning", "note"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i]);
        if (strncmp(p, kinds[i], n) == 0 && p[n] == ':') {
            snprintf(d->kind, sizeof d->kind, "%s", kinds[i]);
            p += n + 1;
            while (*p == ' ') p++;
            break;
        }
    }
    d->text = p;
    return true;
}

static bool parse_nvrtc(const char *s, diagnostic *d)
{
    const char *open = strchr(s, '(');
    const char *nl = strchr(s, '\n');
    if (!open || (nl && open > nl) || open == s || (size_t)(open - s) >= sizeof d->file) return false;
    char *end;
    long line = strtol(open + 1, &end, 10);
    if (end == open + 1 || strncmp(end, "): ", 3) != 0) return false;
    memcpy(d->file, s, (size_t)(open - s));
    d->file[open - s] = '\0';
    d->line = (int)line;
    d->col = 0;
    const char *p = end + 3;
    const char *colon = strstr(p, ": ");
    if (!colon || (nl && colon > nl) || (size_t)(colon - p) >= sizeof d->kind) return false;
    snprintf(d->kind, sizeof d->kind, "%.*s", (int)(colon - p), p);
    /* "warning #177-D" and the like: the kind is its first word(s) before '#' */
    char *hash = strchr(d->kind, '#');
    if (hash) {
        *hash = '\0';
        size_t n = strlen(d->kind);
        while (n && d->kind[n - 1] == ' ') d->kind[--n] = '\0';
    }
    d->text = colon + 2;
    return true;
}

/* Line `line` of `file` in the unit, as the unit's #line directives number it: its text and
** length, or NULL. */
static const char *unit_line(const char *unit, const char *file, int line, size_t *len)
{
    char current[256] = "";
    int number = 1;
    const char *p = unit;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int l = 0;
        char name[256];
        if (strncmp(p, "#line ", 6) == 0 && sscanf(p + 6, "%d \"%255[^\"]\"", &l, name) == 2) {
            snprintf(current, sizeof current, "%s", name);
            number = l;
        } else {
            if (number == line && strcmp(current, file) == 0) {
                *len = n;
                return p;
            }
            number++;
        }
        if (!e) break;
        p = e + 1;
    }
    return NULL;
}

/* Three lines of file around `line`, numbered, with a caret under `col` (1-based; 0: none). */
static void append_context(tocha_text *t, const char *unit, const char *file, int line, int col)
{
    for (int l = line - 1; l <= line + 1; l++) {
        size_t n = 0;
        const char *text = l >= 1 ? unit_line(unit, file, l, &n) : NULL;
        if (!text) continue;
        tocha_text_appendf(t, "%5d | %.*s\n", l, (int)n, text);
        if (l == line && col >= 1 && (size_t)col <= n + 1) {
            tocha_text_append(t, "      | ");
            for (int c = 1; c < col; c++) tocha_text_append(t, text[c - 1] == '\t' ? "\t" : " ");
            tocha_text_append(t, "^\n");
        }
    }
}

/* NVRTC prints the line it blames and a caret line under it after each error: the column, by
** the caret's place against the unit's own text of that line. */
static int nvrtc_column(const char *after, const char *unit, const diagnostic *d)
{
    const char *excerpt = after;
    const char *e1 = strchr(excerpt, '\n');
    if (!e1) return 0;
    const char *caret = e1 + 1, *e2 = strchr(caret, '\n');
    size_t caret_len = e2 ? (size_t)(e2 - caret) : strlen(caret);
    const char *hat = memchr(caret, '^', caret_len);
    size_t n = 0;
    const char *own = unit_line(unit, d->file, d->line, &n);
    if (!hat || !own) return 0;
    long shift = (long)(e1 - excerpt) - (long)n; /* NVRTC's indent of the excerpt */
    long col = (long)(hat - caret) - shift + 1;
    return col >= 1 && (size_t)col <= n + 1 ? (int)col : 0;
}

/* Writes data to TOCHA_DUMP_DIR/<hash of unit>-<tag>.<ext> where that is set; the path in
** path (empty when nothing was written). Never through a link planted at the name. */
void tocha_dump_file(const char *unit, const char *tag, const char *ext, const void *data, size_t size, char *path,
                     size_t room)
{
    path[0] = '\0';
    const char *dir = getenv("TOCHA_DUMP_DIR");
    if (!dir || !*dir) return;
    unsigned long long h = (unsigned long long)XXH3_64bits(unit, strlen(unit));
    int k = snprintf(path, room, "%s/%016llx-%s.%s", dir, h, tag, ext);
    if (k < 0 || (size_t)k >= room) {
        path[0] = '\0';
        return;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    FILE *f = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        path[0] = '\0';
        return;
    }
    if (fwrite(data, 1, size, f) != size) path[0] = '\0';
    if (fclose(f) != 0) path[0] = '\0';
}

/* g++'s context lines for the error that follows them: "file: In instantiation of ...:" and
** "file:line:col:   required from ..." (no kind). */
static bool gcc_context(const char *line)
{
    const char *colon = strstr(line, ": In ");
    const char *nl = strchr(line, '\n');
    if (colon && (!nl || colon < nl)) return true;
    diagnostic d;
    return parse_gcc(line, &d) && !d.kind[0] && (strstr(d.text, "required from") == d.text || strstr(d.text, "required by"));
}

char *tocha_compile_diagnostic(const char *header, const char *tag, const char *log, const char *unit, bool nvrtc)
{
    tocha_text t = {0};
    tocha_text_appendf(&t, "%s\n", header);
    int errors = 0, shown = 0, notes = 0;
    bool showing = false, in_entry = false;
    const char *pending[NOTES_PER_ERROR];
    int pending_count = 0;
    const char *p = log ? log : "";
    while (*p) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        const int len = (int)(next - p - (e ? 1 : 0));
        diagnostic d;
        bool parsed = nvrtc ? parse_nvrtc(p, &d) : parse_gcc(p, &d);
        if (parsed && strstr(d.kind, "error")) {
            errors++;
            showing = errors <= SHOWN_ERRORS;
            notes = 0;
            if (showing) {
                shown++;
                for (int i = 0; i < pending_count; i++) {
                    const char *pe = strchr(pending[i], '\n');
                    tocha_text_appendf(&t, "%.*s\n", (int)(pe ? pe - pending[i] : (long)strlen(pending[i])), pending[i]);
                }
                int col = nvrtc ? nvrtc_column(next, unit, &d) : d.col;
                if (col)
                    tocha_text_appendf(&t, "%s:%d:%d: %s: %.*s\n", d.file, d.line, col, d.kind,
                                       (int)(e ? (size_t)(e - d.text) : strlen(d.text)), d.text);
                else
                    tocha_text_appendf(&t, "%.*s\n", len, p);
                append_context(&t, unit, d.file, d.line, col);
                in_entry |= strcmp(d.file, "<entry point>") == 0;
            }
            pending_count = 0;
        } else if (!nvrtc && gcc_context(p)) {
            if (pending_count < NOTES_PER_ERROR) pending[pending_count++] = p;
        } else if (parsed && showing && !nvrtc && notes < NOTES_PER_ERROR) {
            notes++; /* g++'s notes of the error being shown */
            tocha_text_appendf(&t, "%.*s\n", len, p);
        }
        p = next;
    }
    if (errors == 0) {
        /* nothing recognised: the log as it is, cut short */
        const char *text = log ? log : "(no log)";
        size_t n = strlen(text);
        tocha_text_appendf(&t, "%.*s%s\n", (int)(n > 4000 ? 4000 : n), text, n > 4000 ? "\n..." : "");
    } else if (errors > shown) {
        tocha_text_appendf(&t, "(%d more error%s)\n", errors - shown, errors - shown == 1 ? "" : "s");
    }
    if (in_entry)
        tocha_text_append(&t, "(<entry point> is the function tocha writes from the kernel's name, template_args and "
                              "params: k.entry_point_source)\n");
    char unit_path[4200], log_path[4200];
    tocha_dump_file(unit, tag, "cu", unit, strlen(unit), unit_path, sizeof unit_path);
    tocha_dump_file(unit, tag, "log", log ? log : "", log ? strlen(log) : 0, log_path, sizeof log_path);
    if (unit_path[0] && log_path[0])
        tocha_text_appendf(&t, "the whole log: %s; the translation unit: %s", log_path, unit_path);
    else
        tocha_text_append(&t, "(set TOCHA_DUMP_DIR to keep the whole log and translation unit)");
    return tocha_text_take(&t);
}
