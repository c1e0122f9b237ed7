-- Tab completion: tocha.completion's candidates against a session's values, and the REPL on a
-- terminal (util-linux's script gives it one) completing a name and, inside a string, a file
-- name, seen through what the completed lines evaluate to.
local completion = require "tocha.completion"
local tocha = require "tocha"
local process = require "support.process"

describe("completion", function()
  it("offers globals, fields along a path, and methods after a colon, calling nothing", function()
    rawset(_G, "spec_tocha", tocha)
    rawset(_G, "spec_x", tocha.ones({ 2 }, { device = "sim" }))
    rawset(_G, "spec_up", tocha.UpsampleNearest2dForward.new(2, 2))
    local called = false
    rawset(_G, "spec_trap", setmetatable({}, { __index = function() called = true end }))
    assert.are.same({ "spec_tocha.UpsampleBilinear2d", "spec_tocha.UpsampleNearest2dBackward",
      "spec_tocha.UpsampleNearest2dForward" }, completion.candidates("spec_tocha.Ups"))
    assert.are.same({ "spec_x:to_host", "spec_x:to_table" }, completion.candidates("spec_x:to_"))
    assert.are.same({ "spec_up:forward", "spec_up:forward_output_row_stride" }, completion.candidates("spec_up:forw"))
    assert.are.same({ "spec_tocha.memory.empty_cache" }, completion.candidates("spec_tocha.memory.emp"))
    assert.are.same({ "print" }, completion.candidates("prin"))
    assert.are.same({ "while" }, completion.candidates("whil"))
    assert.are.same({}, completion.candidates("spec_trap.anything.x"))
    assert.are.same({}, completion.candidates("nothing_here.x"))
    assert.are.same({}, completion.candidates("1 + "))
    assert.is_false(called)
    for _, k in ipairs({ "spec_tocha", "spec_x", "spec_up", "spec_trap" }) do rawset(_G, k, nil) end
  end)

  it("completes in the REPL on a terminal: a name, and a file name inside a string", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir) == 0)
    local f = assert(io.open(dir .. "/completion_target.txt", "w"))
    f:write("found it")
    f:close()
    local input = 'tocha.UpsampleNearest2dBack\t.new(2, 3).id\nio.open("completion_ta\t"):read("*a")\n\004'
    local cmd = ("cd %s && printf %s | env TOCHA_DEVICE=sim HOME=%s TOCHA_HISTORY=%s/history timeout 30 script -qfc %s /dev/null 2>&1")
      :format(process.quote(dir), process.quote(input:gsub("%%", "%%%%"):gsub("\t", "\\t"):gsub("\n", "\\n"):gsub("\004", "\\004")),
        process.quote(dir), dir, process.quote(process.exe))
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    os.execute("rm -rf " .. process.quote(dir))
    assert.truthy(out:find("upsample_nearest2d_backward__f32__2__3__", 1, true), out)
    assert.truthy(out:find("found it", 1, true), out)
  end)
end)
