-- The tocha Lua module as a LuaRocks rock, built with CMake: `luarocks make` in this folder
-- installs it (and libtocha) into a LuaJIT tree. Needs what the build needs (CMake, a C
-- compiler, LuaJIT's, libedit's and xxHash's headers, the CUDA toolkit's headers).
package = "tocha"
version = "0.1.0-1"
source = { url = "git+file://." }
description = {
  summary = "GPU tensors and CUDA C kernels compiled at run time, for LuaJIT",
  detailed = "Tensors on NVIDIA GPUs (or a CPU simulator), CUDA C kernels built by NVRTC with their constants baked in, tensor math with broadcasting, reductions and softmax, ops with their gradients (upsample, elementwise, pooling, normalisation, dropout, ...), losses and optimizers, models, streams and CUDA graphs.",
}
dependencies = { "lua == 5.1" } -- LuaJIT reports 5.1
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    CMAKE_INSTALL_LIBDIR = "$(LIBDIR)",
    TOCHA_LUA_DIR = "$(LUADIR)",
    TOCHA_LUAROCKS = "ON",
  },
}
