// epilogue.cuh: what the last write of a matrix product or a convolution does to each sum v it
// computed (after activation.cuh, whose functions F it takes): z = v + bias[col] +
// residual[at], then F(z) for a forward or, where `grad` is given, grad[at] F'(z): the first
// step of a backward through a fused activation (dz = dy F'(z), z recomputed by the forward's
// own kernels instead of being kept from the forward). `at` is the element's offset in the
// output, which the residual and grad tensors share; `col` its channel (or column). Each
// pointer may be null: no bias, no residual, a forward. The sum stays in the compute type A
// (f32 for halves) through every step and is rounded once, by the caller's store.
template <typename T, typename F> struct tocha_epilogue {
    const T *bias, *residual, *grad;

    template <typename A> __device__ __forceinline__ A apply(A v, long long at, long long col) const
    {
        if (bias) v += (A)tocha::to_compute(bias[col]);
        if (residual) v += (A)tocha::to_compute(residual[at]);
        return grad ? F::grad(v, (A)tocha::to_compute(grad[at])) : F::value(v);
    }
};

#define EPILOGUE_RESIDUAL 1
#define EPILOGUE_GRAD 2

// The epilogue of a kernel's arguments: the pointers its flags name, each moved `offset`
// elements on but the bias (a batch's output in a batched product), the rest null.
template <typename T, typename F>
__device__ __forceinline__ tocha_epilogue<T, F> tocha_epilogue_of(const T *bias, int has_bias,
                                                                  const T *residual, const T *grad,
                                                                  int epilogue, long long offset)
{
    const tocha_epilogue<T, F> epi = {has_bias ? bias : (const T *)0,
                                      (epilogue & EPILOGUE_RESIDUAL) ? residual + offset : (const T *)0,
                                      (epilogue & EPILOGUE_GRAD) ? grad + offset : (const T *)0};
    return epi;
}
