/* onnx.c: ONNX model files. The protobuf is decoded by protobuf-c with the ONNX schema compiled
** at build time (onnx.pb-c.c, from the onnx.proto Debian's libonnx-dev ships); this file
** checks what protobuf cannot (a tensor's data against its dims and type) and hands the graph
** out as the plain structs of tocha.h, computed once at read time so that the accessors only
** copy. Tensors' elements come out as little-endian bytes in C order, from raw_data or from
** the typed fields, narrowed where ONNX widens them (int32_data holds f16, bf16, int8, ...). */
#include "internal.h"
#include "onnx.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx.c hands protobuf's host-order typed fields out as little-endian bytes"
#endif

/* protobuf's own parsers stop at 100 nested messages; protobuf-c has no limit and recurses. */
#define MAX_NESTING 100
/* protobuf's limit on one message: a larger model keeps its weights in external files. */
#define MAX_FILE_BYTES ((size_t)2 << 30)

struct tocha_onnx {
    Onnx__ModelProto *proto;
    char *name; /* the file, for messages */
    tocha_onnx_node *nodes;
    tocha_onnx_attribute **attributes; /* [node][attribute] */
    tocha_onnx_tensor *initializers;
    tocha_onnx_value *values[3];
    int64_t n_values[3];
    void **blocks; /* every other allocation of the handle, freed with it */
    size_t n_blocks, cap_blocks;
};

static const char empty[] = "";
static const char *text(const char *s) { return s ? s : empty; }

/* n * size zeroed bytes owned by the handle; NULL (and a failure recorded) when out of memory. */
static void *own(tocha_onnx *m, size_t n, size_t size)
{
    if (m->n_blocks == m->cap_blocks) {
        size_t cap = m->cap_blocks ? 2 * m->cap_blocks : 64;
        void **grown = realloc(m->blocks, cap * sizeof *grown);
        if (!grown) return NULL;
        m->blocks = grown;
        m->cap_blocks = cap;
    }
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p) m->blocks[m->n_blocks++] = p;
    return p;
}

static int out_of_memory(const tocha_onnx *m)
{
    return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "%s: out of host memory reading the model", m->name);
}

/* ---- nesting: checked before protobuf-c recurses ---- */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* How deep messages nest in [p, end) read as descriptor d, capped at MAX_NESTING + 1. Fields of
** message type are followed through the schema; anything malformed ends the walk, since
** protobuf-c refuses it afterwards. The walk is iterative per level and recursive only into
** submessages, so its own depth is bounded by the cap. */
static int nesting(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, int depth)
{
    int deepest = depth;
    while (p < end && deepest <= MAX_NESTING) {
        uint64_t key, len;
        if (!read_varint(&p, end, &key)) break;
        switch (key & 7) {
        case 0:
            if (!read_varint(&p, end, &len)) return deepest;
            break;
        case 1:
            if (end - p < 8) return deepest;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return deepest;
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p)) return deepest;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                                       : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                int inner = nesting(f->descriptor, p, p + len, depth + 1);
                if (inner > deepest) deepest = inner;
            }
            p += len;
            break;
        }
        default: return deepest;
        }
    }
    return deepest;
}

/* ---- tensors ---- */

/* Bytes an element of ONNX data type t takes; 0 for types without fixed-size elements. */
static int element_bytes(int32_t t)
{
    switch (t) {
    case 2:
    case 3:
    case 9:
    case 17:
    case 18:
    case 19:
    case 20: return 1; /* u8 i8 bool f8 */
    case 4:
    case 5:
    case 10:
    case 16: return 2; /* u16 i16 f16 bf16 */
    case 1:
    case 6:
    case 12: return 4; /* f32 i32 u32 */
    case 7:
    case 11:
    case 13:
    case 14: return 8;  /* i64 f64 u64 c64 */
    case 15: return 16; /* c128 */
    default: return 0;  /* string, 4-bit, unknown */
    }
}

/* Which typed field ONNX keeps data type t's elements in, and how many values an element
** takes there (complex: 2). */
enum field { F_NONE, F_FLOAT, F_INT32, F_INT64, F_DOUBLE, F_UINT64 };
static enum field typed_field(int32_t t, int *per_element)
{
    *per_element = 1;
    switch (t) {
    case 1: return F_FLOAT;
    case 14: *per_element = 2; return F_FLOAT;
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 9:
    case 10:
    case 16:
    case 17:
    case 18:
    case 19:
    case 20: return F_INT32;
    case 7: return F_INT64;
    case 11: return F_DOUBLE;
    case 15: *per_element = 2; return F_DOUBLE;
    case 12:
    case 13: return F_UINT64;
    default: return F_NONE;
    }
}

/* out = t checked: dims non-negative and their product representable, data_type set, and the
** data (raw or typed, not both) holding exactly the elements the dims call for. what names the
** tensor in messages. */
static int tensor_of(tocha_onnx *m, const Onnx__TensorProto *t, const char *what, tocha_onnx_tensor *out)
{
    memset(out, 0, sizeof *out);
    out->name = text(t->name);
    out->data_type = t->data_type;
    if (t->n_dims > INT32_MAX)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s has %zu dimensions", m->name, what, t->n_dims);
    out->n_dims = (int32_t)t->n_dims;
    out->dims = t->dims;
    int64_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0)
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s has a negative dimension (%lld)", m->name, what,
                              (long long)t->dims[d]);
        if (t->dims[d] > 0 && n > ((int64_t)1 << 56) / t->dims[d])
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s has more elements than a file can hold", m->name,
                              what);
        n *= t->dims[d];
    }
    out->n_elements = n;
    if (!t->has_data_type || t->data_type == 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s has no data type", m->name, what);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: %s keeps its data in an external file, which tocha does not read "
                          "(export the model with its weights inside)",
                          m->name, what);
    if (t->segment)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s is a segment of a tensor", m->name, what);
    int size = element_bytes(t->data_type);
    out->element_bytes = size;
    int per = 1;
    enum field field = typed_field(t->data_type, &per);
    size_t typed = t->n_float_data + t->n_int32_data + t->n_int64_data + t->n_double_data +
                   t->n_uint64_data + t->n_string_data;
    if (t->has_raw_data && typed)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s has both raw_data and typed data", m->name, what);
    if (size == 0) return TOCHA_OK; /* elements tocha does not hand out: counted, not read */
    uint64_t bytes = (uint64_t)n * (uint64_t)size;
    out->bytes = bytes;
    if (n == 0) {
        if ((t->has_raw_data && t->raw_data.len) || typed)
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s has no elements but holds data", m->name, what);
        return TOCHA_OK;
    }
    if (t->has_raw_data) {
        if (t->raw_data.len != bytes)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "%s: %s holds %zu bytes of raw data; its %lld elements take %llu", m->name,
                              what, t->raw_data.len, (long long)n, (unsigned long long)bytes);
        out->data = t->raw_data.data;
        return TOCHA_OK;
    }
    size_t have = field == F_FLOAT    ? t->n_float_data
                  : field == F_INT32  ? t->n_int32_data
                  : field == F_INT64  ? t->n_int64_data
                  : field == F_DOUBLE ? t->n_double_data
                  : field == F_UINT64 ? t->n_uint64_data
                                      : 0;
    if (have != (uint64_t)n * (uint64_t)per || typed != have)
        return tocha_fail(
            TOCHA_E_ARGUMENT, "%s: %s holds %zu values; its %lld elements of data type %d need %llu",
            m->name, what, typed, (long long)n, (int)t->data_type, (unsigned long long)n * per);
    if (field == F_FLOAT)
        out->data = t->float_data;
    else if (field == F_INT64)
        out->data = t->int64_data;
    else if (field == F_DOUBLE)
        out->data = t->double_data;
    else if (field == F_INT32 && size == 4)
        out->data = t->int32_data;
    else if (field == F_UINT64 && size == 8)
        out->data = t->uint64_data;
    else { /* narrowed: the low bytes of each value */
        uint8_t *d = own(m, (size_t)bytes, 1);
        if (!d) return out_of_memory(m);
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = field == F_INT32 ? (uint64_t)(uint32_t)t->int32_data[i] : t->uint64_data[i];
            memcpy(d + i * size, &v, (size_t)size);
        }
        out->data = d;
    }
    return TOCHA_OK;
}

/* ---- nodes, attributes, values ---- */

static int attribute_of(tocha_onnx *m, const Onnx__NodeProto *node, const Onnx__AttributeProto *a,
                        tocha_onnx_attribute *out)
{
    memset(out, 0, sizeof *out);
    out->name = text(a->name);
    out->type = a->has_type ? (int32_t)a->type : 0;
    out->f = a->f;
    out->i = a->i;
    char *s = own(m, a->s.len + 1, 1);
    if (!s) return out_of_memory(m);
    if (a->s.len) memcpy(s, a->s.data, a->s.len);
    out->s = s;
    out->s_bytes = a->s.len;
    out->n_floats = (int64_t)a->n_floats;
    out->floats = a->floats;
    out->n_ints = (int64_t)a->n_ints;
    out->ints = a->ints;
    out->n_strings = (int64_t)a->n_strings;
    char **strings = own(m, a->n_strings, sizeof *strings);
    if (!strings) return out_of_memory(m);
    for (size_t k = 0; k < a->n_strings; k++) {
        if (!(strings[k] = own(m, a->strings[k].len + 1, 1))) return out_of_memory(m);
        if (a->strings[k].len) memcpy(strings[k], a->strings[k].data, a->strings[k].len);
    }
    out->strings = (const char *const *)strings;
    out->tensor.name = empty;
    if (out->type == TOCHA_ONNX_ATTR_TENSOR && !a->t)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: node \"%s\" (%s) attribute \"%s\": of type TENSOR without a tensor",
                          m->name, text(node->name), text(node->op_type), out->name);
    if (a->t) {
        char what[256];
        snprintf(what, sizeof what, "node \"%s\" (%s) attribute \"%s\"", text(node->name),
                 text(node->op_type), out->name);
        return tensor_of(m, a->t, what, &out->tensor);
    }
    return TOCHA_OK;
}

static int value_of(tocha_onnx *m, const Onnx__ValueInfoProto *v, tocha_onnx_value *out)
{
    out->name = text(v->name);
    out->elem_type = 0;
    out->n_dims = -1;
    const Onnx__TypeProto *type = v->type;
    if (!type || type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !type->tensor_type)
        return TOCHA_OK;
    const Onnx__TypeProto__Tensor *tt = type->tensor_type;
    out->elem_type = tt->has_elem_type ? tt->elem_type : 0;
    if (!tt->shape) return TOCHA_OK;
    size_t n = tt->shape->n_dim;
    if (n > INT32_MAX)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: value \"%s\" has %zu dimensions", m->name, out->name,
                          n);
    int64_t *dims = own(m, n, sizeof *dims);
    const char **names = own(m, n, sizeof *names);
    if (!dims || !names) return out_of_memory(m);
    for (size_t d = 0; d < n; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        dims[d] = -1;
        names[d] = empty;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dim->dim_value >= 0)
            dims[d] = dim->dim_value;
        else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            names[d] = text(dim->dim_param);
    }
    out->n_dims = (int32_t)n;
    out->dims = dims;
    out->dim_names = names;
    return TOCHA_OK;
}

static int values_of(tocha_onnx *m, int list, Onnx__ValueInfoProto **values, size_t n)
{
    m->n_values[list] = (int64_t)n;
    if (!(m->values[list] = own(m, n, sizeof(tocha_onnx_value)))) return out_of_memory(m);
    for (size_t i = 0; i < n; i++) {
        int rc = value_of(m, values[i], &m->values[list][i]);
        if (rc) return rc;
    }
    return TOCHA_OK;
}

/* Everything the accessors hand out, computed and checked once. */
static int digest(tocha_onnx *m)
{
    const Onnx__GraphProto *g = m->proto->graph;
    if (!g) return tocha_fail(TOCHA_E_ARGUMENT, "%s: the model has no graph", m->name);
    m->nodes = own(m, g->n_node, sizeof *m->nodes);
    m->attributes = own(m, g->n_node, sizeof *m->attributes);
    m->initializers = own(m, g->n_initializer, sizeof *m->initializers);
    if (!m->nodes || !m->attributes || !m->initializers) return out_of_memory(m);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (n->n_input > INT32_MAX || n->n_output > INT32_MAX || n->n_attribute > INT32_MAX)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "%s: node \"%s\" has too many inputs, outputs or attributes", m->name,
                              text(n->name));
        tocha_onnx_node *out = &m->nodes[i];
        out->name = text(n->name);
        out->op_type = text(n->op_type);
        out->domain = text(n->domain);
        out->n_inputs = (int32_t)n->n_input;
        out->n_outputs = (int32_t)n->n_output;
        out->n_attributes = (int32_t)n->n_attribute;
        out->inputs = (const char *const *)n->input;
        out->outputs = (const char *const *)n->output;
        if (!(m->attributes[i] = own(m, n->n_attribute, sizeof(tocha_onnx_attribute))))
            return out_of_memory(m);
        for (size_t j = 0; j < n->n_attribute; j++) {
            int rc = attribute_of(m, n, n->attribute[j], &m->attributes[i][j]);
            if (rc) return rc;
        }
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        char what[256];
        snprintf(what, sizeof what, "initializer \"%s\"", text(g->initializer[i]->name));
        int rc = tensor_of(m, g->initializer[i], what, &m->initializers[i]);
        if (rc) return rc;
    }
    int rc = values_of(m, TOCHA_ONNX_INPUTS, g->input, g->n_input);
    if (!rc) rc = values_of(m, TOCHA_ONNX_OUTPUTS, g->output, g->n_output);
    if (!rc) rc = values_of(m, TOCHA_ONNX_VALUE_INFOS, g->value_info, g->n_value_info);
    return rc;
}

/* ---- the ABI ---- */

int tocha_onnx_read_bytes(const void *bytes, size_t size, const char *name, tocha_onnx **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the model, got NULL");
    *out = NULL;
    if (!name) name = "ONNX model";
    if (!bytes && size)
        return tocha_fail(TOCHA_E_ARGUMENT, "bytes: expected the file's bytes, got NULL");
    if (size > MAX_FILE_BYTES)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %zu bytes, past protobuf's 2 GiB limit on a model",
                          name, size);
    if (nesting(&onnx__model_proto__descriptor, bytes, (const uint8_t *)bytes + size, 0) > MAX_NESTING)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: messages nest deeper than %d (not an ONNX model)", name,
                          MAX_NESTING);
    tocha_onnx *m = calloc(1, sizeof *m);
    if (!m || !(m->name = tocha_strdup(name))) {
        free(m);
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "%s: out of host memory reading the model", name);
    }
    m->proto = onnx__model_proto__unpack(NULL, size, bytes);
    int rc =
        m->proto
            ? digest(m)
            : tocha_fail(TOCHA_E_ARGUMENT,
                         "%s: not an ONNX model (a protobuf of the ONNX schema): malformed or cut short",
                         name);
    if (rc) {
        tocha_onnx_destroy(m);
        return rc;
    }
    *out = m;
    return TOCHA_OK;
}

int tocha_onnx_read(const char *path, tocha_onnx **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the model, got NULL");
    *out = NULL;
    int kind;
    int rc = tocha_file_kind(path, &kind);
    if (rc) return rc;
    if (kind == TOCHA_FILE_MISSING) return tocha_fail(TOCHA_E_IO, "%s: no such file", path);
    if (kind != TOCHA_FILE_REGULAR) return tocha_fail(TOCHA_E_IO, "%s: not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return tocha_fail(TOCHA_E_IO, "%s: %s", path, strerror(errno));
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return tocha_fail(TOCHA_E_IO, "%s: cannot find its size", path);
    }
    if ((unsigned long)size > MAX_FILE_BYTES) {
        fclose(f);
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %ld bytes, past protobuf's 2 GiB limit on a model",
                          path, size);
    }
    void *bytes = malloc(size ? (size_t)size : 1);
    if (!bytes) {
        fclose(f);
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "%s: out of host memory for its %ld bytes", path, size);
    }
    size_t got = fread(bytes, 1, (size_t)size, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed || got != (size_t)size) {
        free(bytes);
        return tocha_fail(TOCHA_E_IO, "%s: read %zu of its %ld bytes", path, got, size);
    }
    rc = tocha_onnx_read_bytes(bytes, (size_t)size, path, out);
    free(bytes);
    return rc;
}

void tocha_onnx_destroy(tocha_onnx *m)
{
    if (!m) return;
    if (m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
    for (size_t i = 0; i < m->n_blocks; i++) free(m->blocks[i]);
    free(m->blocks);
    free(m->name);
    free(m);
}

static int check_model(const tocha_onnx *m, const void *out)
{
    if (!m) return tocha_fail(TOCHA_E_ARGUMENT, "model: expected an ONNX model, got NULL");
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the result, got NULL");
    return TOCHA_OK;
}

static int check_index(const tocha_onnx *m, const char *what, int64_t i, size_t n)
{
    if (i < 0 || (uint64_t)i >= n)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: %s %lld out of range (the model has %zu)", m->name,
                          what, (long long)i, n);
    return TOCHA_OK;
}

int tocha_onnx_get_info(const tocha_onnx *m, tocha_onnx_info *out)
{
    int rc = check_model(m, out);
    if (rc) return rc;
    const Onnx__ModelProto *p = m->proto;
    const Onnx__GraphProto *g = p->graph;
    out->ir_version = p->has_ir_version ? p->ir_version : 0;
    out->producer_name = text(p->producer_name);
    out->producer_version = text(p->producer_version);
    out->graph_name = text(g->name);
    out->n_opsets = (int64_t)p->n_opset_import;
    out->n_nodes = (int64_t)g->n_node;
    out->n_initializers = (int64_t)g->n_initializer;
    out->n_inputs = m->n_values[TOCHA_ONNX_INPUTS];
    out->n_outputs = m->n_values[TOCHA_ONNX_OUTPUTS];
    out->n_value_infos = m->n_values[TOCHA_ONNX_VALUE_INFOS];
    return TOCHA_OK;
}

int tocha_onnx_get_opset(const tocha_onnx *m, int64_t i, const char **domain, int64_t *version)
{
    int rc = check_model(m, domain);
    if (!rc) rc = check_model(m, version);
    if (!rc) rc = check_index(m, "opset", i, m->proto->n_opset_import);
    if (rc) return rc;
    const Onnx__OperatorSetIdProto *o = m->proto->opset_import[i];
    *domain = text(o->domain);
    *version = o->has_version ? o->version : 0;
    return TOCHA_OK;
}

int tocha_onnx_get_node(const tocha_onnx *m, int64_t i, tocha_onnx_node *out)
{
    int rc = check_model(m, out);
    if (!rc) rc = check_index(m, "node", i, m->proto->graph->n_node);
    if (!rc) *out = m->nodes[i];
    return rc;
}

int tocha_onnx_get_attribute(const tocha_onnx *m, int64_t i, int64_t j, tocha_onnx_attribute *out)
{
    int rc = check_model(m, out);
    if (!rc) rc = check_index(m, "node", i, m->proto->graph->n_node);
    if (!rc) rc = check_index(m, "attribute", j, (size_t)m->nodes[i].n_attributes);
    if (!rc) *out = m->attributes[i][j];
    return rc;
}

int tocha_onnx_get_initializer(const tocha_onnx *m, int64_t i, tocha_onnx_tensor *out)
{
    int rc = check_model(m, out);
    if (!rc) rc = check_index(m, "initializer", i, m->proto->graph->n_initializer);
    if (!rc) *out = m->initializers[i];
    return rc;
}

int tocha_onnx_get_value(const tocha_onnx *m, int list, int64_t i, tocha_onnx_value *out)
{
    int rc = check_model(m, out);
    if (rc) return rc;
    if (list < TOCHA_ONNX_INPUTS || list > TOCHA_ONNX_VALUE_INFOS)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "list: expected TOCHA_ONNX_INPUTS, _OUTPUTS or _VALUE_INFOS, got %d", list);
    static const char *const names[] = {"input", "output", "value_info"};
    rc = check_index(m, names[list], i, (size_t)m->n_values[list]);
    if (!rc) *out = m->values[list][i];
    return rc;
}
