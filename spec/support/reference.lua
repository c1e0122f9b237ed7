-- Plain-Lua references for the specs: element conversions, Philox random numbers, random
-- shapes, and the helpers of the product specs (matmul, Linear, convolutions). Independent of
-- tocha's kernels: written from the IEEE 754 and Philox definitions.
local ffi = require "ffi"
local bit = require "bit"

local M = {}

-- Rounds v to a binary float with p significant bits and minimum normal exponent emin,
-- to nearest, ties to even; overflow becomes infinity.
local function round_binary(v, p, emin, max_finite)
  if v ~= v or v == 0 or v == math.huge or v == -math.huge then return v end
  local a = math.abs(v)
  local _, e = math.frexp(a) -- a = m * 2^e, m in [0.5, 1): exponent E = e - 1
  local q = 2 ^ (math.max(e - 1, emin) - (p - 1))
  local x = a / q
  local r = math.floor(x)
  local frac = x - r
  if frac > 0.5 or (frac == 0.5 and r % 2 == 1) then r = r + 1 end
  local out = r * q
  if out > max_finite then out = math.huge end
  return v < 0 and -out or out
end

local f32_box = ffi.new("float[1]")
local converters = {
  f64 = function(v) return v end,
  f32 = function(v) f32_box[0] = v; return tonumber(f32_box[0]) end,
  f16 = function(v) return round_binary(v, 11, -14, 65504) end,
  bf16 = function(v) return round_binary(v, 8, -126, (2 - 2 ^ -7) * 2 ^ 127) end,
}
local int_range = { u8 = { 0, 255 }, i32 = { -2 ^ 31, 2 ^ 31 - 1 }, i64 = { -2 ^ 63, 2 ^ 63 } }

-- v (a Lua number) converted to dtype as tocha's cast defines it, back as a Lua number.
function M.convert(v, dtype)
  local f = converters[dtype]
  if f then return f(v) end
  local r = int_range[dtype]
  if v ~= v then return 0 end
  if v <= r[1] then return r[1] end
  if v >= r[2] then return r[2] end
  return v < 0 and math.ceil(v) or math.floor(v)
end

M.float_dtypes = { "f32", "f64", "f16", "bf16" }
M.int_dtypes = { "u8", "i32", "i64" }
M.all_dtypes = { "f32", "f64", "f16", "bf16", "u8", "i32", "i64" }

-- ---- Philox-4x32-10 ----

local U32 = 4294967296
local function mulhilo(a, b)
  local p = ffi.new("uint64_t", a) * b
  return tonumber(bit.rshift(p, 32)), tonumber(bit.band(p, 0xffffffffULL))
end
local function xor(a, b) return bit.bxor(a, b) % U32 end

-- The four 32-bit words Philox-4x32-10 gives for (counter, 0, 0, 0) under key seed.
function M.philox(counter, seed)
  local c0, c1, c2, c3 = counter % U32, math.floor(counter / U32), 0, 0
  local k0, k1 = seed % U32, math.floor(seed / U32)
  for _ = 1, 10 do
    local hi0, lo0 = mulhilo(0xD2511F53, c0)
    local hi1, lo1 = mulhilo(0xCD9E8D57, c2)
    c0, c1, c2, c3 = xor(xor(hi1, c1), k0), lo1, xor(xor(hi0, c3), k1), lo0
    k0 = (k0 + 0x9E3779B9) % U32
    k1 = (k1 + 0xBB67AE85) % U32
  end
  return c0, c1, c2, c3
end

local function unit(a, b)
  return (math.floor(a / 32) * 2 ^ 26 + math.floor(b / 64)) / 2 ^ 53
end

-- Element i (0-based) of tocha's uniform fill, before conversion to the dtype.
function M.uniform(i, seed, low, high, integer)
  local r0, r1 = M.philox(i, seed)
  local v = low + (high - low) * unit(r0, r1)
  return integer and math.floor(v) or v
end

-- Element i (0-based) of tocha's normal fill, before conversion to the dtype.
function M.normal(i, seed, mean, std, integer)
  local r0, r1, r2, r3 = M.philox(i, seed)
  local u1, u2 = 1 - unit(r0, r1), unit(r2, r3)
  local v = mean + std * math.sqrt(-2 * math.log(u1)) * math.cos(6.283185307179586 * u2)
  if integer then -- rint(): to nearest, ties to even
    local f = math.floor(v)
    local d = v - f
    v = (d > 0.5 or (d == 0.5 and f % 2 == 1)) and f + 1 or f
  end
  return v
end

-- ---- random cases ----

-- A generator of reproducible cases; prints its seed so that a failure can be replayed
-- (TOCHA_SPEC_SEED=<seed>).
function M.rng(label)
  local seed = tonumber(os.getenv("TOCHA_SPEC_SEED")) or (os.time() % 100000)
  print(("[%s] seed %d"):format(label, seed))
  math.randomseed(seed)
  return { seed = seed }
end

-- The number of elements of a shape (a list of sizes).
function M.numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- The 1-based indices of row-major element i (1-based) of shape, and back.
function M.indices_of(i, shape)
  local idx, rest = {}, i - 1
  for k = #shape, 1, -1 do
    idx[k] = rest % shape[k] + 1
    rest = math.floor(rest / shape[k])
  end
  return idx
end
function M.flat_of(idx, shape)
  local pos = 0
  for k = 1, #shape do pos = pos * shape[k] + (idx[k] - 1) end
  return pos + 1
end

function M.random_shape(max_dims, max_size)
  local shape = {}
  for i = 1, math.random(1, max_dims) do shape[i] = math.random(1, max_size) end
  return shape
end

-- Tolerance of one rounding to dtype, relative.
M.eps = { f64 = 2 ^ -52, f32 = 2 ^ -23, f16 = 2 ^ -10, bf16 = 2 ^ -7, u8 = 0, i32 = 0, i64 = 0 }

-- The devices a numeric spec runs on, with the tag each carries: sim always; cuda (tagged
-- #gpu) so that the GPU run picks it up.
function M.devices()
  return { { name = "sim", tag = "" }, { name = "cuda", tag = " #gpu" } }
end

-- The product specs: a result's error relative to the sum of |terms| of each element, allowed
-- per dtype (f32 sums in f32, halves round once to the dtype).
M.product_tol = { f64 = 1e-12, f32 = 1e-5, f16 = 2e-3, bf16 = 1e-2 }

-- A tensor's elements as f64 Lua numbers, row-major.
function M.values(t) return t:cast("f64"):to_table(true) end

-- Small integers from -2 to 2 of dtype dt, drawn with seed: the products of up to 32 of them
-- and their sums are exact in every float dtype.
function M.small_ints(shape, dt, device, seed)
  return require("tocha").randn(shape, { device = device, seed = seed }):mul(1.3):round():clamp(-2, 2):cast(dt)
end

-- Asserts that the tensor got matches want = {values, sums of |terms|} to tol relative to
-- each element's sum (tol 0: exactly), naming label and the element that differs.
function M.compare_terms(got, want, tol, label)
  local g, w, scale = M.values(got), want[1], want[2]
  assert(#w == #g, ("%s: %d elements, expected %d"):format(label, #g, #w))
  for e = 1, #w do
    local err = tol == 0 and (g[e] == w[e] and 0 or 1) or math.abs(g[e] - w[e]) / scale[e]
    assert(err <= tol, ("%s: element %d is %.17g, expected %.17g"):format(label, e, g[e], w[e]))
  end
end

return M
