// tensor_core.h: the simulator's side of tensor_core.cuh, mma.sync m16n8k16 and ldmatrix, each
// lane's registers in PTX's fragment layout. The warp's lanes meet twice (two __syncwarp):
// each puts what it gives in its slot of a per-thread table, then reads the slots of the others;
// the second meeting keeps a fast lane from overwriting its slot before the slow ones have read
// it. A lane that never arrives fails the launch, naming __syncwarp.
namespace tocha_sim
{

// Each thread's slot: up to 40 bytes of what a lane gives a warp operation of this file.
struct lane_slot {
    unsigned w[10];
    const void *address;
};
static thread_local lane_slot lane_slots[MAX_THREADS];

// The slots of the calling thread's warp, its first lane's.
static inline lane_slot *warp_slots() { return lane_slots + team.current / WARP * WARP; }

// A 16-bit element of a register: the low half for e = 0, the high for e = 1, as f64.
static inline double half_of(unsigned w, int e, int bf16)
{
    const unsigned short bits = (unsigned short)(e ? w >> 16 : w & 0xffffu);
    if (bf16) {
        __nv_bfloat16 v;
        memcpy(&v, &bits, 2);
        return (double)__bfloat162float(v);
    }
    __half v;
    memcpy(&v, &bits, 2);
    return (double)__half2float(v);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (tensor_core.cuh gives the
// layouts): the products and c summed in f64, rounded once to f32.
static inline void mma_m16n8k16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4],
                                int bf16)
{
    lane_slot &mine = lane_slots[team.current];
    for (int i = 0; i < 4; ++i) mine.w[i] = a[i];
    mine.w[4] = b[0], mine.w[5] = b[1];
    for (int i = 0; i < 4; ++i) memcpy(&mine.w[6 + i], &c[i], 4);
    __syncwarp();
    const lane_slot *lanes = warp_slots();
    double A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        const unsigned *w = lanes[l].w;
        for (int e = 0; e < 2; ++e) {
            A[g][2 * t + e] = half_of(w[0], e, bf16);
            A[g + 8][2 * t + e] = half_of(w[1], e, bf16);
            A[g][2 * t + 8 + e] = half_of(w[2], e, bf16);
            A[g + 8][2 * t + 8 + e] = half_of(w[3], e, bf16);
            B[2 * t + e][g] = half_of(w[4], e, bf16);
            B[2 * t + 8 + e][g] = half_of(w[5], e, bf16);
            float c0, c1;
            memcpy(&c0, &w[6 + e], 4);
            memcpy(&c1, &w[8 + e], 4);
            C[g][2 * t + e] = c0;
            C[g + 8][2 * t + e] = c1;
        }
    }
    const int lane = (int)(team.current % WARP), g = lane / 4, t = lane % 4;
    float out[4];
    for (int i = 0; i < 4; ++i) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        double s = C[row][col];
        for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
        out[i] = (float)s;
    }
    __syncwarp();
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16 (tensor_core.cuh gives the layout):
// lane l's row address serves row l % 8 of matrix l / 8.
static inline void ldmatrix(unsigned *r, int count, bool trans, const void *row)
{
    lane_slot &mine = lane_slots[team.current];
    mine.address = row;
    __syncwarp();
    const lane_slot *lanes = warp_slots();
    const int lane = (int)(team.current % WARP), g = lane / 4, t = lane % 4;
    unsigned out[4];
    for (int j = 0; j < count; ++j) {
        unsigned short e[2];
        for (int k = 0; k < 2; ++k) {
            // plain: row g, element 2t + k of matrix j; transposed: row 2t + k, element g
            const int src_row = trans ? 2 * t + k : g, src_col = trans ? g : 2 * t + k;
            const unsigned char *p = (const unsigned char *)lanes[8 * j + src_row].address;
            if (((unsigned long long)p & 15u) != 0)
                trap("ldmatrix: lane %d's row address %p is not 16-byte aligned", 8 * j + src_row,
                     (const void *)p);
            memcpy(&e[k], p + 2 * src_col, 2);
        }
        out[j] = (unsigned)e[0] | (unsigned)e[1] << 16;
    }
    __syncwarp();
    for (int j = 0; j < count; ++j) r[j] = out[j];
}
} // namespace tocha_sim
