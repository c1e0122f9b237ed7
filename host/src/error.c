/*
** error.c: the last-error message of each thread.
** Messages can be long (a compiler log), so the buffer grows as needed; if it cannot, the
** message is cut rather than lost.
*/
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char *message;
static _Thread_local size_t message_cap;
static _Thread_local char fallback[256];
static _Thread_local bool use_fallback;

static void set_message(const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int need = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (need < 0) need = 0;
    if ((size_t)need + 1 > message_cap) {
        char *grown = realloc(message, (size_t)need + 1);
        if (!grown) {
            vsnprintf(fallback, sizeof fallback, fmt, ap);
            use_fallback = true;
            return;
        }
        message = grown;
        message_cap = (size_t)need + 1;
    }
    vsnprintf(message, message_cap, fmt, ap);
    use_fallback = false;
}

int tocha_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return status;
}

const char *tocha_last_error(void)
{
    if (use_fallback) return fallback;
    return message ? message : "";
}

const char *tocha_status_name(int status)
{
    switch (status) {
    case TOCHA_OK: return "ok";
    case TOCHA_E_ARGUMENT: return "argument";
    case TOCHA_E_OUT_OF_MEMORY: return "out of memory";
    case TOCHA_E_UNAVAILABLE: return "unavailable";
    case TOCHA_E_COMPILE: return "compile";
    case TOCHA_E_DRIVER: return "driver";
    case TOCHA_E_IO: return "io";
    case TOCHA_E_FREED: return "freed";
    case TOCHA_E_INTERNAL: return "internal";
    default: return "unknown";
    }
}

const char *tocha_version(void) { return TOCHA_VERSION_STRING; }
