-- The examples that check themselves run to the end and pass their checks, on sim, each in a
-- tocha process of its own: examples/quickstart.lua (`make demo`) and examples/neck.lua
-- (`make neck`).
local process = require "support.process"

local function run_example(name)
  local source = os.getenv("TOCHA_SOURCE_DIR") or "."
  local out, err, status = process.run { args = { source .. "/examples/" .. name }, env = { TOCHA_DEVICE = "sim" } }
  return out, err, status
end

describe("the examples", function()
  it("neck.lua: a model of upsamples, joins, elementwise ops, a bias, a mean loss and a Lua op trains, matches central differences and replays", function()
    local out, err, status = run_example("neck.lua")
    assert.are.equal(0, status, err .. out)
    assert.truthy(out:find("all checks passed", 1, true), out)
    assert.is_nil(out:find("MISMATCH", 1, true), out)
    local oks = select(2, out:gsub(" ok\n", ""))
    assert.are.equal(9, oks, out)
  end)

  it("quickstart.lua runs to its end", function()
    local out, err, status = run_example("quickstart.lua")
    assert.are.equal(0, status, err .. out)
  end)
end)
