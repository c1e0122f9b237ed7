/* dtype.c: the element types tocha knows, their names, sizes and CUDA C spellings. */
#include "internal.h"

#include <string.h>

static const struct {
    const char *name;
    int size;
    const char *ctype;
} dtypes[TOCHA_DTYPE_COUNT] = {
    [TOCHA_F32] = {"f32", 4, "float"},       [TOCHA_F64] = {"f64", 8, "double"},
    [TOCHA_F16] = {"f16", 2, "__half"},      [TOCHA_BF16] = {"bf16", 2, "__nv_bfloat16"},
    [TOCHA_U8] = {"u8", 1, "unsigned char"}, [TOCHA_I32] = {"i32", 4, "int"},
    [TOCHA_I64] = {"i64", 8, "long long"},
};

bool tocha_dtype_valid(int dtype) { return dtype >= 0 && dtype < TOCHA_DTYPE_COUNT; }

int tocha_dtype_from_name(const char *name, int *out)
{
    if (!name) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: expected a name, got NULL");
    for (int i = 0; i < TOCHA_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = i;
            return TOCHA_OK;
        }
    return tocha_fail(TOCHA_E_ARGUMENT,
                      "dtype: unknown dtype '%s' (expected f32, f64, f16, bf16, u8, i32 or i64)", name);
}

const char *tocha_dtype_name(int dtype) { return tocha_dtype_valid(dtype) ? dtypes[dtype].name : NULL; }
int tocha_dtype_size(int dtype) { return tocha_dtype_valid(dtype) ? dtypes[dtype].size : 0; }
const char *tocha_dtype_ctype(int dtype)
{
    return tocha_dtype_valid(dtype) ? dtypes[dtype].ctype : NULL;
}
