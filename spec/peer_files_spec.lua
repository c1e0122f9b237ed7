-- Files across the language boundary: PyTorch and NumPy read the safetensors and .npy files
-- tocha writes from cuda tensors, and tocha reads theirs onto cuda, every dtype, each value
-- compared for equality with a pattern both sides compute (spec/support/peer_files.py).
-- Tagged #gpu: it runs where PyTorch is, the GPU machine; pending where python3 lacks torch or
-- numpy.
local tocha = require "tocha"
local ffi = require "ffi"

local SHAPES = {
  f32 = { 2, 3, 5 }, f64 = { 7 }, f16 = { 1, 4, 1, 9 }, bf16 = { 3, 1, 2, 2, 2 },
  u8 = { 16, 17 }, i32 = { 5, 1, 3 }, i64 = { 2, 2, 2, 2, 2, 2 },
}
local DTYPES = { "f32", "f64", "f16", "bf16", "u8", "i32", "i64" }
local NPY_DTYPES = { "f32", "f64", "f16", "u8", "i32", "i64" }

-- Element i (0-based) of pattern k in dtype dt, as peer_files.py defines it.
local function pattern(i, k, dt)
  local r = (i * k) % 251
  if dt == "u8" then return r end
  local s = r - 125
  if dt == "i32" then return s * 1000003 end
  if dt == "i64" then return s * 2 ^ 33 + 7 end
  return s / 4
end

local numel = require("support.reference").numel

-- Pattern k as a tensor of dtype dt on cuda: written as f64, then cast (every value is exact).
local function expected(dt, k)
  local shape = SHAPES[dt]
  local n = numel(shape)
  local host = ffi.new("double[?]", n)
  for i = 0, n - 1 do host[i] = pattern(i, k, dt) end
  local t = tocha.empty(shape, { dtype = "f64", device = "cuda" })
  t:write(host)
  return dt == "f64" and t or t:cast(dt)
end

-- The first element of t that is not pattern k, as an error message, or nil.
local function mismatch(name, t, dt, k)
  if t:dtype() ~= dt then return ("%s: dtype %s, expected %s"):format(name, t:dtype(), dt) end
  if table.concat(t:shape(), "x") ~= table.concat(SHAPES[dt], "x") then
    return ("%s: shape %s, expected %s"):format(name, table.concat(t:shape(), "x"), table.concat(SHAPES[dt], "x"))
  end
  assert(t:device():match("^cuda"), name .. " is on " .. t:device())
  local values = t:cast("f64"):to_table(true)
  for i, v in ipairs(values) do
    local want = pattern(i - 1, k, dt)
    if v ~= want then return ("%s: element %d is %s, expected %s"):format(name, i - 1, v, want) end
  end
end

local peers = require "support.peers"
local function python_has_peers() return peers.available("torch, numpy") end
local function run_peer(mode, dir, k)
  local ok, out = peers.run("peer_files.py", mode, dir, k)
  return ok, out
end

describe("files read and written by PyTorch and NumPy #gpu", function()
  local dir

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir) == 0)
  end)

  after_each(function() os.execute("rm -rf " .. dir) end)

  it("PyTorch and NumPy read tocha's files with the same values, every dtype", function()
    if not python_has_peers() then return pending("python3 with torch and numpy is not installed here") end
    local k = 37
    local tensors = {}
    for _, dt in ipairs(DTYPES) do tensors["t_" .. dt] = expected(dt, k) end
    tocha.save(dir .. "/tocha.safetensors", tensors, { from = "tocha" })
    for _, dt in ipairs(NPY_DTYPES) do tocha.save_npy(("%s/tocha_%s.npy"):format(dir, dt), tensors["t_" .. dt]) end
    local ok, out = run_peer("check", dir, k)
    print(out)
    assert.is_true(ok, out)
  end)

  it("tocha reads the files PyTorch and NumPy write, onto cuda, every dtype", function()
    if not python_has_peers() then return pending("python3 with torch and numpy is not installed here") end
    local k = 53
    local ok, out = run_peer("write", dir, k)
    print(out)
    assert.is_true(ok, out)
    local back, meta = tocha.load(dir .. "/peer.safetensors", { device = "cuda" })
    assert.are.same({ from = "torch" }, meta)
    local names = {}
    for name in pairs(back) do names[#names + 1] = name end
    table.sort(names)
    local want = {}
    for _, dt in ipairs(DTYPES) do want[#want + 1] = "t_" .. dt end
    table.sort(want)
    assert.are.same(want, names)
    for _, dt in ipairs(DTYPES) do
      assert.is_nil(mismatch("t_" .. dt, back["t_" .. dt], dt, k))
    end
    for _, dt in ipairs(NPY_DTYPES) do
      local t = tocha.load_npy(("%s/peer_%s.npy"):format(dir, dt), { device = "cuda" })
      assert.is_nil(mismatch("npy " .. dt, t, dt, k))
    end
  end)
end)
