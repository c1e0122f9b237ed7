/*
** onnx_file.c: libFuzzer target over the ONNX reader. Any bytes may be handed to
** tocha_onnx_read_bytes: it must refuse them with a status or hand out a model whose every
** node, attribute, tensor and value reads in bounds (each string to its end, each tensor's
** bytes and dims, each attribute's lists), checked here by touching all of it under ASan.
*/
#include "tocha.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static volatile unsigned sink;

static void touch(const void *p, uint64_t bytes)
{
    const unsigned char *b = p;
    for (uint64_t i = 0; i < bytes; i++) sink += b[i];
}

static void touch_text(const char *s) { touch(s, strlen(s) + 1); }

static void touch_tensor(const tocha_onnx_tensor *t)
{
    touch_text(t->name);
    touch(t->dims, (uint64_t)t->n_dims * sizeof *t->dims);
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->dims[d];
    if (n != t->n_elements) __builtin_trap();
    if (t->data) {
        if (t->bytes != (uint64_t)t->n_elements * (uint64_t)t->element_bytes) __builtin_trap();
        touch(t->data, t->bytes);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tocha_onnx *m = NULL;
    if (tocha_onnx_read_bytes(data, size, "fuzz", &m) != TOCHA_OK) return 0;
    tocha_onnx_info info;
    if (tocha_onnx_get_info(m, &info) != TOCHA_OK) __builtin_trap();
    touch_text(info.producer_name);
    touch_text(info.graph_name);
    for (int64_t i = 0; i < info.n_opsets; i++) {
        const char *domain;
        int64_t version;
        if (tocha_onnx_get_opset(m, i, &domain, &version) != TOCHA_OK) __builtin_trap();
        touch_text(domain);
    }
    for (int64_t i = 0; i < info.n_nodes; i++) {
        tocha_onnx_node n;
        if (tocha_onnx_get_node(m, i, &n) != TOCHA_OK) __builtin_trap();
        touch_text(n.name);
        touch_text(n.op_type);
        for (int k = 0; k < n.n_inputs; k++) touch_text(n.inputs[k]);
        for (int k = 0; k < n.n_outputs; k++) touch_text(n.outputs[k]);
        for (int j = 0; j < n.n_attributes; j++) {
            tocha_onnx_attribute a;
            if (tocha_onnx_get_attribute(m, i, j, &a) != TOCHA_OK) __builtin_trap();
            touch_text(a.name);
            touch(a.s, a.s_bytes + 1);
            touch(a.floats, (uint64_t)a.n_floats * sizeof *a.floats);
            touch(a.ints, (uint64_t)a.n_ints * sizeof *a.ints);
            for (int64_t k = 0; k < a.n_strings; k++) touch_text(a.strings[k]);
            if (a.type == TOCHA_ONNX_ATTR_TENSOR) touch_tensor(&a.tensor);
        }
    }
    for (int64_t i = 0; i < info.n_initializers; i++) {
        tocha_onnx_tensor t;
        if (tocha_onnx_get_initializer(m, i, &t) != TOCHA_OK) __builtin_trap();
        touch_tensor(&t);
    }
    const int64_t counts[3] = {info.n_inputs, info.n_outputs, info.n_value_infos};
    for (int list = 0; list < 3; list++) {
        for (int64_t i = 0; i < counts[list]; i++) {
            tocha_onnx_value v;
            if (tocha_onnx_get_value(m, list, i, &v) != TOCHA_OK) __builtin_trap();
            touch_text(v.name);
            for (int d = 0; d < v.n_dims; d++) {
                sink += (unsigned)v.dims[d];
                touch_text(v.dim_names[d]);
            }
        }
    }
    tocha_onnx_get_node(m, info.n_nodes, &(tocha_onnx_node){0}); /* out of range: a status */
    tocha_onnx_destroy(m);
    return 0;
}
