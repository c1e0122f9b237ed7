-- tocha.image: PNG files to and from u8 tensors, through stb (Debian's libstb).
--
--   local img = tocha.image.read("in.png")          -- u8 [1, C, H, W], C = the file's channels
--   tocha.image.write("out.png", img)               -- C of 1 (grey), 2, 3 (RGB) or 4 (RGBA)
--
-- Files store pixels interleaved (H, W, C); tensors are NCHW, so the channels are split on
-- the host.
local ffi = require "ffi"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local file = require "tocha.file"
local raise, show = errors.raise, errors.show

local M = {}

if not pcall(ffi.typeof, "struct tocha_stb_marker") then
  ffi.cdef [[
struct tocha_stb_marker { int unused; };
unsigned char *stbi_load(const char *filename, int *x, int *y, int *channels_in_file, int desired_channels);
void stbi_image_free(void *retval_from_stbi_load);
const char *stbi_failure_reason(void);
int stbi_write_png(const char *filename, int w, int h, int comp, const void *data, int stride_in_bytes);
]]
end

local stb
local function library()
  if not stb then
    local ok, lib = pcall(ffi.load, "stb")
    if not ok then ok, lib = pcall(ffi.load, "libstb.so.0") end
    if not ok then
      error("tocha.image: libstb is missing (install Debian's libstb-dev)", 3)
    end
    stb = lib
  end
  return stb
end

-- Reads a PNG (or any format stb reads) into a u8 tensor [1, C, H, W] on device.
function M.read(path, device)
  if type(path) ~= "string" then raise("path: expected a string, got " .. show(path)) end
  file.open_read(path):close() -- a regular file: stb would block on a FIFO
  local lib = library()
  local w, h, c = ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("int[1]")
  local pixels = lib.stbi_load(path, w, h, c, 0)
  if pixels == nil then
    raise(("%s: %s"):format(path, ffi.string(lib.stbi_failure_reason())))
  end
  local W, H, C = w[0], h[0], c[0]
  local planar = ffi.new("uint8_t[?]", W * H * C)
  for y = 0, H - 1 do
    for x = 0, W - 1 do
      local src = (y * W + x) * C
      for ch = 0, C - 1 do planar[(ch * H + y) * W + x] = pixels[src + ch] end
    end
  end
  lib.stbi_image_free(pixels)
  local t = tensor.empty({ 1, C, H, W }, { dtype = "u8", device = device })
  t:write(planar, W * H * C)
  return t
end

-- Writes a u8 tensor [1, C, H, W] (or [C, H, W]) as a PNG.
function M.write(path, t)
  if type(path) ~= "string" then raise("path: expected a string, got " .. show(path)) end
  if not tensor.is_tensor(t) or t:dtype() ~= "u8" then
    raise("image: expected a u8 tensor [1, C, H, W]")
  end
  local s = t:shape()
  if #s == 4 and s[1] == 1 then table.remove(s, 1) end
  if #s ~= 3 or s[1] < 1 or s[1] > 4 then
    raise("image: expected shape [1, C, H, W] with C from 1 to 4, got [" .. table.concat(t:shape(), "x") .. "]")
  end
  local C, H, W = s[1], s[2], s[3]
  if H < 1 or W < 1 then -- (an empty tensor: PNG has no image without rows or columns)
    raise("image: a PNG needs at least one row and column, got [" .. table.concat(t:shape(), "x") .. "]")
  end
  local planar = t:to_host()
  local pixels = ffi.new("uint8_t[?]", W * H * C)
  for y = 0, H - 1 do
    for x = 0, W - 1 do
      local dst = (y * W + x) * C
      for ch = 0, C - 1 do pixels[dst + ch] = planar[(ch * H + y) * W + x] end
    end
  end
  local lib = library()
  file.write(path, function(_, temp)
    if lib.stbi_write_png(temp, W, H, C, pixels, W * C) == 0 then error("stb could not write the PNG", 0) end
  end)
end

errors.register(M, "image.")
return M
