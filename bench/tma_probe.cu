// bench/tma_probe.cu: how fast the TMA writes shared memory to global memory at destinations
// that are not 16-byte aligned, through a 1-D tensor map (whose coordinates are elements), beside
// the device-to-device copy, a plain 16-byte store stream and aligned bulk copies. A probe for
// the forward's rows that are not whole vectors (docs/performance.md, "What is short"): if a
// tensor store at any element offset runs as fast as an aligned one, a row image built once in
// shared memory can be stored to every output row whatever its alignment.
//
//   nvcc -arch=sm_90 -O2 -o tma_probe bench/tma_probe.cu -lcuda
//   ./tma_probe            the copy, the stores, bulk copies and tensor stores at +0 elements
//   ./tma_probe SHIFT      tensor stores at +SHIFT elements only (a fault ends the process, so
//                          each shift runs in its own)
//
// Prints, per variant, the median time of 20 launches over a 512 MiB destination, its write
// rate and that rate as % of the copy's (read + written) rate.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const size_t BYTES = 512ull << 20;
static const int WARPS = 4, IMAGE = 512; // bytes of shared image per warp

// Fills the warp's image and makes it visible to the async proxy.
__device__ unsigned char *warp_image(int warp)
{
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *img = smem + warp * IMAGE;
    for (int i = threadIdx.x & 31; i < IMAGE; i += 32) img[i] = (unsigned char)(i * 7 + warp);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    return img;
}

__global__ void stores16(uint4 *dst, size_t n)
{
    const uint4 v = make_uint4(threadIdx.x, 1, 2, 3);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst + i), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// Aligned bulk copies of `box` bytes, lane 0 of each warp.
__global__ void bulk(unsigned char *dst, size_t boxes, int box)
{
    const int warp = threadIdx.x >> 5;
    unsigned char *img = warp_image(warp);
    if ((threadIdx.x & 31) != 0) return;
    const unsigned s = (unsigned)__cvta_generic_to_shared(img);
    for (size_t k = blockIdx.x * (size_t)WARPS + warp; k < boxes; k += (size_t)gridDim.x * WARPS) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + k * box), "r"(s), "r"(box) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Tensor stores of one box each at element coordinate k * box_elems + shift, lane 0 of each warp.
__global__ void tensor(const __grid_constant__ CUtensorMap map, size_t boxes, int box_elems, int shift)
{
    const int warp = threadIdx.x >> 5;
    unsigned char *img = warp_image(warp);
    if ((threadIdx.x & 31) != 0) return;
    const unsigned s = (unsigned)__cvta_generic_to_shared(img);
    for (size_t k = blockIdx.x * (size_t)WARPS + warp; k < boxes; k += (size_t)gridDim.x * WARPS) {
        const int c = (int)(k * box_elems) + shift;
        asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%1}], [%2];" ::"l"(&map), "r"(c), "r"(s) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

template <typename F> static float median_ms(F launch)
{
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) launch();
    std::vector<float> t;
    for (int i = 0; i < 20; ++i) {
        CHECK(cudaEventRecord(a));
        launch();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv)
{
    const int only = argc > 1 ? atoi(argv[1]) : -1;
    int sms;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned char *src, *dst;
    CHECK(cudaMalloc(&src, BYTES));
    CHECK(cudaMalloc(&dst, BYTES + 4096));
    const float copy = median_ms([&] { CHECK(cudaMemcpyAsync(dst, src, BYTES, cudaMemcpyDeviceToDevice)); });
    const double copy_rate = 2.0 * BYTES / copy / 1e6; // GB/s, read + written
    printf("%-34s %9.1f us %8.1f GB/s (read + written)\n", "copy", copy * 1e3, copy_rate);
    auto report = [&](const char *name, float ms) {
        const double rate = BYTES / ms / 1e6;
        printf("%-34s %9.1f us %8.1f GB/s %6.1f%% of copy\n", name, ms * 1e3, rate, 100.0 * rate / copy_rate);
    };
    if (only < 0) report("16-byte stores", median_ms([&] { stores16<<<sms * 8, 256>>>((uint4 *)dst, BYTES / 16); }));
    const int grid = sms * 16;
    const size_t shared = WARPS * IMAGE;
    for (int box : {128, 256, 512})
        if (only < 0) report(box == 128 ? "bulk copies, 128 B" : box == 256 ? "bulk copies, 256 B" : "bulk copies, 512 B",
               median_ms([&] { bulk<<<grid, WARPS * 32, shared>>>(dst, BYTES / box, box); }));
    for (int esize : {1, 2}) {
        for (int box_elems : {128, 256}) {
            CUtensorMap map;
            const cuuint64_t dim = BYTES / esize + 4096 / esize, stride = 0;
            const cuuint32_t boxdim = box_elems, estride = 1;
            CUresult r = cuTensorMapEncodeTiled(&map, esize == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 1, dst, &dim,
                                                &stride, &boxdim, &estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
            if (r != CUDA_SUCCESS) {
                printf("cuTensorMapEncodeTiled: error %d\n", (int)r);
                return 1;
            }
            for (int shift : {only < 0 ? 0 : only}) {
                char name[80];
                snprintf(name, sizeof name, "tensor %d B x %d, +%d element%s", esize, box_elems, shift, shift == 1 ? "" : "s");
                const size_t boxes = BYTES / esize / box_elems;
                report(name, median_ms([&] { tensor<<<grid, WARPS * 32, shared>>>(map, boxes, box_elems, shift); }));
            }
        }
    }
    // The last variant (2-byte elements, boxes of 256) wrote box 0, warp 0's image, at element
    // `shift`: check it.
    const int at = 2 * (only < 0 ? 0 : only);
    std::vector<unsigned char> h(1024 + at);
    CHECK(cudaMemcpy(h.data(), dst, h.size(), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < 512; ++i) wrong += h[at + i] != (unsigned char)(i * 7);
    printf("check: %d of 512 bytes wrong\n", wrong);
    return 0;
}
