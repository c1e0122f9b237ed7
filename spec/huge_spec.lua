-- Past 2^31 elements on the simulator: a u8 forward whose output has more than 2^31
-- elements, and its backward, checked exactly at boundary and sampled positions. The input
-- is a hash of each element's index, so expected values need no copy of the tensors.
local tocha = require "tocha"
local ffi = require "ffi"
local bit = require "bit"

local PATTERN = [[
__device__ void index_hash(unsigned char *x, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        x[i] = (unsigned char)(((unsigned long long)i * 2654435761ull) >> 13);
}
]]

local function hash(i)
  local p = ffi.new("uint64_t", i) * 2654435761ULL
  return tonumber(bit.band(bit.rshift(p, 13), 255ULL))
end

local function element(t, i)
  local buf = ffi.new("uint8_t[1]")
  t:read(buf, i, 1)
  return buf[0]
end

describe("past 2^31 elements on the simulator", function()
  it("forward and backward of u8 are exact at boundaries and sampled positions", function()
    local B, C, H, W, sh, sw = 1, 2, 32768, 16385, 2, 1
    local OH, OW = H * sh, W * sw
    local n_in, n_out = B * C * H * W, B * C * OH * OW
    assert.is_true(n_out > 2 ^ 31)
    local x = tocha.empty({ B, C, H, W }, { dtype = "u8", device = "sim" })
    tocha.kernel { source = PATTERN, name = "index_hash", params = "u8* x, i64 n" }:launch(1024, 256, x, n_in)
    local up = tocha.UpsampleNearest2dForward.new(sh, sw, 128, "u8")
    local y = up:forward(x)
    local seed = tonumber(os.getenv("TOCHA_SPEC_SEED")) or os.time() % 100000
    print(("[huge] seed %d"):format(seed))
    math.randomseed(seed)
    local positions = { 0, 1, n_out - 2, n_out - 1, 2 ^ 31 - 1, 2 ^ 31, 2 ^ 31 + 1 }
    for _ = 1, 300 do positions[#positions + 1] = math.random(0, n_out - 1) end
    for _, j in ipairs(positions) do
      local ow, oh, plane = j % OW, math.floor(j / OW) % OH, math.floor(j / (OW * OH))
      local i = (plane * H + math.floor(oh / sh)) * W + math.floor(ow / sw)
      assert(element(y, j) == hash(i), "y[" .. j .. "]")
    end
    -- A view reaching past 2^31 elements from its first (the two first columns of every row of
    -- both planes) copies on the 64-bit element path; each element checked at sampled rows.
    local cols = y:narrow(4, 1, 2):contiguous()
    assert.are.same({ B, C, OH, 2 }, cols:size())
    local rows = { 0, 1, OH - 1 }
    for _ = 1, 60 do rows[#rows + 1] = math.random(0, OH - 1) end
    for plane = 0, C - 1 do
      for _, oh in ipairs(rows) do
        for ow = 0, 1 do
          local i = (plane * H + math.floor(oh / sh)) * W + math.floor(ow / sw)
          assert(element(cols, (plane * OH + oh) * 2 + ow) == hash(i), "cols[" .. plane .. "][" .. oh .. "][" .. ow .. "]")
        end
      end
    end
    -- Backward with y as dy: each dx element sums its 2 x 1 block, two copies of x, saturated.
    local dx = up:backward(x, y)
    x:free()
    y:free()
    local samples = { 0, n_in - 1, math.floor(2 ^ 31 / OW / sh) * W }
    for _ = 1, 300 do samples[#samples + 1] = math.random(0, n_in - 1) end
    for _, i in ipairs(samples) do
      assert(element(dx, i) == math.min(255, 2 * hash(i)), "dx[" .. i .. "]")
    end
  end)
end)
