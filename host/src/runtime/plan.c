/* plan.c: launch plans, a fixed list of kernel launches whose arguments are checked and packed
** once and then run as often as needed. A model builds one at load (its shapes are fixed then)
** so that a forward is this loop and nothing else. Addresses that change from run to run (a
** model's inputs, or every node's output for a training forward) are slots: their arguments are
** packed with a placeholder address (tocha_plan_slot_address) and patched with the run's
** address, the offset into the placeholder kept, since an op may pass a pointer into a buffer.
** Every other address the plan names is held (the block stays allocated while the plan lives),
** and guarded tensors are checked at each run, so that a parameter freed by its user is
** refused by name rather than read. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Placeholders lie far above any address a process or a GPU hands out (user space ends at
** 2^47): slot s covers [PLACEHOLDER_BASE + s * SLOT_SPAN, + SLOT_SPAN). */
#define PLACEHOLDER_BASE (UINT64_C(1) << 52)
#define SLOT_SPAN (UINT64_C(1) << 40)

typedef struct plan_launch {
    tocha_kernel *kernel;
    uint32_t grid[3], block[3];
    uint32_t shared_bytes;
    int nargs;
    uint64_t values[TOCHA_MAX_PARAMS]; /* each argument's bytes, at the start of its 8 */
} plan_launch;

typedef struct plan_patch {
    int launch, arg, slot;
    uint64_t offset;
} plan_patch;

typedef struct plan_guard {
    const tocha_tensor *tensor;
    char name[96];
} plan_guard;

struct tocha_plan {
    tocha_device *device;
    int n_slots;
    plan_launch *launches;
    int n_launches, cap_launches;
    plan_patch *patches;
    int n_patches, cap_patches;
    plan_guard *guards;
    int n_guards, cap_guards;
    tocha_storage **held;
    int n_held, cap_held;
};

/* Makes room for one more element of a growing array; false when host memory is out. */
static bool grow(void **items, int *cap, int n, size_t size)
{
    if (n < *cap) return true;
    int grown = *cap ? 2 * *cap : 16;
    void *p = realloc(*items, (size_t)grown * size);
    if (!p) return false;
    *items = p;
    *cap = grown;
    return true;
}

uint64_t tocha_plan_slot_address(int slot)
{
    if (slot < 0 || slot >= TOCHA_PLAN_MAX_SLOTS) return 0;
    return PLACEHOLDER_BASE + (uint64_t)slot * SLOT_SPAN;
}

int tocha_plan_new(tocha_device *device, int n_slots, tocha_plan **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the plan, got NULL");
    *out = NULL;
    if (!device) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (n_slots < 0 || n_slots > TOCHA_PLAN_MAX_SLOTS)
        return tocha_fail(TOCHA_E_ARGUMENT, "slots: expected 0 to %d, got %d", TOCHA_PLAN_MAX_SLOTS,
                          n_slots);
    tocha_plan *p = calloc(1, sizeof *p);
    if (!p) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a plan");
    p->device = device;
    p->n_slots = n_slots;
    *out = p;
    return TOCHA_OK;
}

void tocha_plan_destroy(tocha_plan *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_held; i++) tocha_storage_release(p->held[i]);
    free(p->held);
    free(p->guards);
    free(p->patches);
    free(p->launches);
    free(p);
}

int tocha_plan_launch_count(const tocha_plan *p) { return p ? p->n_launches : 0; }

/* Holds the block behind a fixed address of the plan, once. */
static int hold(tocha_plan *p, uint64_t address)
{
    tocha_storage *s = tocha_storage_find(p->device, address);
    if (!s) return TOCHA_OK;
    for (int i = 0; i < p->n_held; i++)
        if (p->held[i] == s) return TOCHA_OK;
    if (!grow((void **)&p->held, &p->cap_held, p->n_held, sizeof *p->held))
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a plan");
    p->held[p->n_held++] = s;
    s->holders++;
    return TOCHA_OK;
}

int tocha_plan_add(tocha_plan *p, tocha_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                   const tocha_arg_list *args)
{
    return tocha_plan_add_shared(p, k, grid, block, 0, args);
}

int tocha_plan_add_shared(tocha_plan *p, tocha_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                          uint32_t shared_bytes, const tocha_arg_list *args)
{
    if (!p) return tocha_fail(TOCHA_E_ARGUMENT, "plan: expected a plan, got NULL");
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (!grid || !block)
        return tocha_fail(TOCHA_E_ARGUMENT, "grid, block: expected three sizes each, got NULL");
    if (!args) return tocha_fail(TOCHA_E_ARGUMENT, "args: expected an argument list, got NULL");
    int st = tocha_kernel_check_dims(grid, block);
    if (!st) st = tocha_kernel_check_launch(k, p->device, block, shared_bytes);
    if (st) return st;
    if (!grow((void **)&p->launches, &p->cap_launches, p->n_launches, sizeof *p->launches))
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a plan");
    plan_launch *l = &p->launches[p->n_launches];
    memset(l, 0, sizeof *l);
    if ((st = tocha_kernel_pack_values(k, args, l->values))) return st;
    /* Built and loaded now, so that a run neither compiles nor loads (a capture could not). */
    void *fn;
    if ((st = tocha_kernel_function(k, p->device, &fn))) return st;
    int first_patch = p->n_patches;
    for (int i = 0; i < args->count; i++) {
        if (args->args[i].kind != TOCHA_ARG_POINTER) continue;
        uint64_t a = l->values[i];
        if (a < PLACEHOLDER_BASE) {
            st = hold(p, a);
        } else if ((a - PLACEHOLDER_BASE) / SLOT_SPAN >= (uint64_t)p->n_slots) {
            st = tocha_fail(TOCHA_E_ARGUMENT,
                            "argument %d: 0x%llx is the placeholder of no slot of the plan (it has %d)",
                            i + 1, (unsigned long long)a, p->n_slots);
        } else if (!grow((void **)&p->patches, &p->cap_patches, p->n_patches, sizeof *p->patches)) {
            st = tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a plan");
        } else {
            p->patches[p->n_patches++] = (plan_patch){.launch = p->n_launches,
                                                      .arg = i,
                                                      .slot = (int)((a - PLACEHOLDER_BASE) / SLOT_SPAN),
                                                      .offset = (a - PLACEHOLDER_BASE) % SLOT_SPAN};
        }
        if (st) {
            p->n_patches = first_patch; /* the launch is not added: nor are its patches */
            return st;
        }
    }
    l->kernel = k;
    l->nargs = args->count;
    l->shared_bytes = shared_bytes;
    memcpy(l->grid, grid, sizeof l->grid);
    memcpy(l->block, block, sizeof l->block);
    p->n_launches++;
    return TOCHA_OK;
}

int tocha_plan_guard(tocha_plan *p, const tocha_tensor *t, const char *name)
{
    if (!p) return tocha_fail(TOCHA_E_ARGUMENT, "plan: expected a plan, got NULL");
    if (!t) return tocha_fail(TOCHA_E_ARGUMENT, "tensor: expected a tensor, got NULL");
    if (!grow((void **)&p->guards, &p->cap_guards, p->n_guards, sizeof *p->guards))
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a plan");
    plan_guard *g = &p->guards[p->n_guards++];
    g->tensor = t;
    snprintf(g->name, sizeof g->name, "%s", name ? name : "a tensor of the plan");
    return TOCHA_OK;
}

int tocha_plan_run(tocha_plan *p, const uint64_t *slots, int n_slots)
{
    if (!p) return tocha_fail(TOCHA_E_ARGUMENT, "plan: expected a plan, got NULL");
    return tocha_plan_run_range(p, slots, n_slots, 0, p->n_launches);
}

int tocha_plan_run_range(tocha_plan *p, const uint64_t *slots, int n_slots, int first, int count)
{
    if (!p) return tocha_fail(TOCHA_E_ARGUMENT, "plan: expected a plan, got NULL");
    if (first < 0 || count < 0 || first > p->n_launches || count > p->n_launches - first)
        return tocha_fail(TOCHA_E_ARGUMENT, "launches: [%d, %d + %d) is not a range of the plan's %d", first, first,
                          count, p->n_launches);
    if (n_slots != p->n_slots)
        return tocha_fail(TOCHA_E_ARGUMENT, "slots: expected %d addresses, got %d", p->n_slots, n_slots);
    if (n_slots > 0 && !slots)
        return tocha_fail(TOCHA_E_ARGUMENT, "slots: expected addresses, got NULL");
    for (int i = 0; i < n_slots; i++)
        if (slots[i] == 0)
            return tocha_fail(TOCHA_E_ARGUMENT, "slots[%d]: expected an address, got 0", i + 1);
    for (int i = 0; i < p->n_guards; i++)
        if (p->guards[i].tensor->freed)
            return tocha_fail(TOCHA_E_FREED, "%s: tensor was freed", p->guards[i].name);
    for (int i = 0; i < p->n_patches; i++) {
        const plan_patch *q = &p->patches[i];
        p->launches[q->launch].values[q->arg] = slots[q->slot] + q->offset;
    }
    for (int i = first; i < first + count; i++) {
        plan_launch *l = &p->launches[i];
        void *args[TOCHA_MAX_PARAMS];
        for (int a = 0; a < l->nargs; a++) args[a] = &l->values[a];
        int st = tocha_kernel_launch_shared(l->kernel, p->device, l->grid, l->block, l->shared_bytes, args);
        if (st) return st;
    }
    return TOCHA_OK;
}
