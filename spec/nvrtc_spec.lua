-- Every built-in kernel variant compiles for the H200 (sm_90) through NVRTC, with no GPU
-- present; TOCHA_ARCH names another target.
local tocha = require "tocha"
local ref = require "support.reference"

local arch = os.getenv("TOCHA_ARCH") or "sm_90"

describe("NVRTC for " .. arch, function()
  for _, op in ipairs({ "fill", "uniform", "normal", "compare" }) do
    it("compiles " .. op .. " for every dtype", function()
      for _, dt in ipairs(ref.all_dtypes) do
        local size = tocha.builtin_kernel(op, dt):build(arch)
        assert.is_true(size > 1000, op .. " " .. dt)
      end
    end)
  end

  it("compiles cast for every pair of dtypes", function()
    for _, from in ipairs(ref.all_dtypes) do
      for _, to in ipairs(ref.all_dtypes) do
        if from ~= to then
          assert.is_true(tocha.builtin_kernel("cast", from, to):build(arch) > 1000, from .. " -> " .. to)
        end
      end
    end
  end)

  it("names each variant's entry point after its function", function()
    local k = tocha.builtin_kernel("cast", "f16", "i64")
    assert.are.equal("tocha_cast_entry_point", k.entry_point_name)
    assert.truthy(k.entry_point_source:find("tocha_cast<__half, long long>(x, y, n)", 1, true))
  end)
end)
