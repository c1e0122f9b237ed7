/* event.c: device events, for timing work on a device's queue. */
#include "internal.h"

#include <stdlib.h>

struct tocha_event {
    tocha_device *device;
    void *handle;
    bool recorded;
};

int tocha_event_new(tocha_device *d, tocha_event **out)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    tocha_event *e = calloc(1, sizeof *e);
    if (!e) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an event");
    int st = d->backend->event_new(d, &e->handle);
    if (st) {
        free(e);
        return st;
    }
    e->device = d;
    *out = e;
    return TOCHA_OK;
}

void tocha_event_destroy(tocha_event *e)
{
    if (!e) return;
    e->device->backend->event_destroy(e->device, e->handle);
    free(e);
}

void *tocha_event_parts(const tocha_event *e, tocha_device **device, bool *recorded)
{
    *device = e->device;
    *recorded = e->recorded;
    return e->handle;
}

int tocha_event_record(tocha_event *e)
{
    if (!e) return tocha_fail(TOCHA_E_ARGUMENT, "event: expected an event, got NULL");
    int st = tocha_refuse_during_capture(e->device, "record an event");
    if (st) return st;
    st = e->device->backend->event_record(e->device, e->handle, tocha_device_stream_handle(e->device));
    if (!st) e->recorded = true;
    return st;
}

int tocha_event_elapsed_ms(tocha_event *start, tocha_event *end, double *ms)
{
    if (!start || !end || !ms)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected %s, got NULL",
                          !start ? "start"
                          : !end ? "end"
                                 : "ms",
                          !ms && start && end ? "a place for the result" : "an event");
    if (start->device != end->device)
        return tocha_fail(TOCHA_E_ARGUMENT, "end: events are on %s and %s", start->device->name,
                          end->device->name);
    if (!start->recorded || !end->recorded)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: event was never recorded",
                          start->recorded ? "end" : "start");
    return start->device->backend->event_elapsed(start->device, start->handle, end->handle, ms);
}
