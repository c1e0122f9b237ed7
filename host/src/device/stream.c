/* stream.c: streams, the queues of work on a device, and each device's current stream (where
** launches, copies and event records go). The backends give the queue itself: a CUDA stream
** that also orders with the legacy default stream; on sim, where work runs when it is queued,
** a token of the stream's identity. */
#include "internal.h"

#include <stdlib.h>

int tocha_stream_new(tocha_device *d, tocha_stream **out)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the stream, got NULL");
    tocha_stream *s = calloc(1, sizeof *s);
    if (!s) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a stream");
    int st = d->backend->stream_new(d, &s->handle);
    if (st) {
        free(s);
        return st;
    }
    s->device = d;
    *out = s;
    return TOCHA_OK;
}

void tocha_stream_destroy(tocha_stream *s)
{
    if (!s) return;
    if (s->capture) tocha_graph_capture_abandon(s);
    if (s->device->stream == s) s->device->stream = NULL;
    s->device->backend->stream_destroy(s->device, s->handle);
    free(s);
}

tocha_device *tocha_stream_device(const tocha_stream *s) { return s ? s->device : NULL; }

int tocha_stream_synchronize(tocha_stream *s)
{
    if (!s) return tocha_fail(TOCHA_E_ARGUMENT, "stream: expected a stream, got NULL");
    int st = tocha_refuse_during_capture(s->device, "synchronize");
    if (st) return st;
    return s->device->backend->stream_synchronize(s->device, s->handle);
}

int tocha_stream_wait_event(tocha_stream *s, tocha_event *e)
{
    if (!s) return tocha_fail(TOCHA_E_ARGUMENT, "stream: expected a stream, got NULL");
    if (!e) return tocha_fail(TOCHA_E_ARGUMENT, "event: expected an event, got NULL");
    tocha_device *ed = NULL;
    bool recorded = false;
    void *handle = tocha_event_parts(e, &ed, &recorded);
    if (ed != s->device)
        return tocha_fail(TOCHA_E_ARGUMENT, "event: it is on %s, the stream on %s", ed->name,
                          s->device->name);
    if (!recorded) return tocha_fail(TOCHA_E_ARGUMENT, "event: it was never recorded");
    return s->device->backend->stream_wait_event(s->device, s->handle, handle);
}

int tocha_device_set_stream(tocha_device *d, tocha_stream *s)
{
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (s && s->device != d)
        return tocha_fail(TOCHA_E_ARGUMENT, "stream: it is on %s, not %s", s->device->name, d->name);
    d->stream = s;
    return TOCHA_OK;
}

tocha_stream *tocha_device_get_stream(tocha_device *d) { return d ? d->stream : NULL; }

void *tocha_device_stream_handle(const tocha_device *d) { return d->stream ? d->stream->handle : NULL; }
