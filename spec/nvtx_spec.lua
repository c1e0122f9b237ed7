-- tocha.nvtx: ranges pushed and popped in balance, range() closing its range whatever fn does,
-- and the calls reaching NVTX itself: a profiler's injection library (here a small one built by
-- the spec, named by NVTX_INJECTION64_PATH as nsys and ncu name theirs) is loaded at the first
-- range of a script that opens one, through tocha.bench too.
local tocha = require "tocha"
local process = require "support.process"
local fails_with = require("support.assertions").fails_with

describe("tocha.nvtx", function()
  it("counts the ranges open on the thread", function()
    local base = tocha.nvtx.depth()
    assert.are.equal(base + 1, tocha.nvtx.push("outer"))
    assert.are.equal(base + 2, tocha.nvtx.push("inner"))
    assert.are.equal(base + 1, tocha.nvtx.pop())
    assert.are.equal(base, tocha.nvtx.pop())
  end)

  it("refuses a pop without a push and a name that is not a string", function()
    while tocha.nvtx.depth() > 0 do tocha.nvtx.pop() end
    fails_with("tocha.nvtx.pop: no range is open on this thread (a pop without a push)", function() tocha.nvtx.pop() end)
    fails_with("tocha.nvtx.push: name: expected a string, got number", function() tocha.nvtx.push(3) end)
  end)

  it("range() returns fn's results and closes its range, also when fn raises", function()
    local base = tocha.nvtx.depth()
    local a, b = tocha.nvtx.range("sum", function(x, y) return x + y, x * y end, 3, 4)
    assert.are.same({ 7, 12 }, { a, b })
    assert.are.equal(base, tocha.nvtx.depth())
    local ok, err = pcall(tocha.nvtx.range, "fails", function() error("inside", 0) end)
    assert.is_false(ok)
    assert.are.equal("inside", err)
    assert.are.equal(base, tocha.nvtx.depth())
  end)

  it("reaches NVTX: a profiler's injection library is loaded at a script's first range", function()
    local dir = process.tempdir()
    local c = dir .. "/inject.c"
    local f = assert(io.open(c, "w"))
    f:write([[
#include <stdio.h>
#include <stdlib.h>
int InitializeInjectionNvtx2(void *get_export_table)
{
    (void)get_export_table;
    FILE *f = fopen(getenv("TOCHA_TEST_NVTX_OUT"), "a");
    if (f) { fputs("initialized\n", f); fclose(f); }
    return 1;
}
]])
    f:close()
    assert.is_true(os.execute(("cc -shared -fPIC -o %s/inject.so %s"):format(dir, c)) == 0)
    local out = dir .. "/out.txt"
    local env = { NVTX_INJECTION64_PATH = dir .. "/inject.so", TOCHA_TEST_NVTX_OUT = out }
    local _, err, status = process.tocha({ "-e", "local t = require 'tocha' t.bench(function() end, { reps = 2, warmup = 0 })" }, "", env)
    assert.are.equal(0, status, err)
    assert.are.equal("initialized\n", assert(io.open(out)):read("*a"))
    os.remove(out)
    process.tocha({ "-e", "require 'tocha'" }, "", env) -- no range, no profiler loaded
    assert.is_nil(io.open(out))
    process.remove_tree(dir)
  end)
end)
