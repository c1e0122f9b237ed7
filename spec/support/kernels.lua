-- A small raw kernel for the specs: y = A * x + y + b, with its dtype and A as template
-- arguments.
local tocha = require "tocha"

local M = {}

M.AXPY = [[
template <typename D, int A>
__device__ void axpy(const D *x, D *y, long long n, D b)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (D)A * x[i] + y[i] + b;
}
]]

function M.axpy(dtype, a)
  local ctype = ({ f32 = "float", f64 = "double", i32 = "int" })[dtype]
  return tocha.kernel {
    source = M.AXPY, name = "axpy", template_args = ctype .. ", " .. a,
    params = ("%s* x, %s* y, i64 n, %s b"):format(dtype, dtype, dtype),
  }
end

return M
