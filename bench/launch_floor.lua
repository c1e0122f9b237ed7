-- bench/launch_floor.lua: the CUDA driver's own cost of a launch, as a floor for tocha's.
--
-- empty_launch() loads an empty kernel with the upsample kernels' parameter list (two
-- pointers, six 32-bit integers) straight through libcuda and returns three functions:
-- launch() (one cuLaunchKernel of it, from Lua through the FFI), sync() and close(). It runs
-- in tocha's context: tocha must have used the device first (its primary context is then
-- current on this thread). Returns nil and a reason where there is no driver.
local ffi = require "ffi"

local M = {}

ffi.cdef [[
int cuCtxGetCurrent(void **ctx);
int cuModuleLoadData(void **module, const void *image);
int cuModuleGetFunction(void **fn, void *module, const char *name);
int cuModuleUnload(void *module);
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void *stream, void **params, void **extra);
int cuCtxSynchronize(void);
]]

-- PTX for the target of every supported GPU: the driver compiles it for the device at load.
local PTX = [[
.version 7.0
.target sm_50
.address_size 64
.visible .entry tocha_empty_launch(.param .u64 x, .param .u64 y, .param .u32 b, .param .u32 c,
                                   .param .u32 h, .param .u32 w, .param .u32 oh, .param .u32 ow)
{
  ret;
}
]]

function M.empty_launch()
  local ok, cu = pcall(ffi.load, "libcuda.so.1")
  if not ok then return nil, "no CUDA driver" end
  local ctx = ffi.new("void *[1]")
  if cu.cuCtxGetCurrent(ctx) ~= 0 or ctx[0] == nil then return nil, "no current context" end
  local module, fn = ffi.new("void *[1]"), ffi.new("void *[1]")
  local r = cu.cuModuleLoadData(module, PTX)
  if r ~= 0 then return nil, "cuModuleLoadData failed: " .. r end
  local function close() cu.cuModuleUnload(module[0]) end
  r = cu.cuModuleGetFunction(fn, module[0], "tocha_empty_launch")
  if r ~= 0 then close(); return nil, "cuModuleGetFunction failed: " .. r end
  local ptrs = ffi.new("uint64_t[2]", 0, 0)
  local ints = ffi.new("int32_t[6]", 1, 16, 32, 32, 64, 64)
  local params = ffi.new("void *[8]")
  params[0], params[1] = ptrs, ptrs + 1
  for i = 0, 5 do params[2 + i] = ints + i end
  local function launch() return cu.cuLaunchKernel(fn[0], 128, 1, 1, 128, 1, 1, 0, nil, params, nil) end
  local function sync() return cu.cuCtxSynchronize() end
  r = launch()
  if r == 0 then r = sync() end
  if r ~= 0 then close(); return nil, "the empty kernel did not run: " .. r end
  return launch, sync, close
end

return M
