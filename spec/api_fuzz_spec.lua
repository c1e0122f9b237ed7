-- A seeded fuzzer of the public Lua API (spec/support/api_fuzz.lua, run in a child tocha
-- process under a time limit and a simulator memory limit): every public function and method
-- called with values drawn from every Lua type, edge numbers, wrong tensors, tables with holes
-- and cycles, calls with a dot instead of a colon, every operator and metamethod on tensors and
-- on tocha's other objects, graphs captured around random calls, and models built of random
-- values. Each call must return or raise "tocha.<function>: <detail>" (or "tocha: ..."), never
-- a raw Lua or FFI error, a crash or a hang, and the session must stay usable. TOCHA_FUZZ_CALLS sets the number of calls (default
-- 20000) and TOCHA_FUZZ_SEED the seed (default: the time, printed).
local process = require "support.process"

local CALLS = os.getenv("TOCHA_FUZZ_CALLS") or "20000"
local SEED = os.getenv("TOCHA_FUZZ_SEED") or tostring(os.time())

describe("the public Lua API under random calls", function()
  it(("returns or raises a tocha error for each of %s calls, with no crash or hang"):format(CALLS), function()
    local src = os.getenv("TOCHA_SOURCE_DIR") or "."
    local out, err, status = process.run {
      exe = "timeout",
      args = { "600", process.exe, src .. "/spec/support/api_fuzz.lua" },
      env = { TOCHA_FUZZ_CALLS = CALLS, TOCHA_FUZZ_SEED = SEED, TOCHA_SIM_MEMORY_LIMIT = "256M",
        TOCHA_DEVICE = "sim" },
    }
    print(("[api fuzz] seed %s: %s"):format(SEED, out:match("calls %d+ findings %d+") or "no summary"))
    assert.are.equal(0, status, ("seed %s: status %s\n%s\n%s"):format(SEED, tostring(status), out, err:sub(-2000)))
    assert.truthy(out:find("calls " .. CALLS .. " findings 0", 1, true), out)
  end)
end)
