-- tocha.sweep: a kernel (or several, or several configurations) timed over every point of a
-- grid of named axes, as a table, a CSV file and a plot.
--
--   local r = tocha.sweep {
--     name = "row_sums",
--     axes = { { "rows", { 256, 4096 } }, { "n", { 1024, 4096, 16384 } } },  -- in this order
--     cases = { block128 = run128, block256 = run256 },  -- or run = fn for one case
--     setup = function(p) return { x = tocha.rand({ p.rows, p.n }) } end,     -- untimed, per point
--     bytes = function(p) return 4 * p.rows * (p.n + 1) end,                   -- optional; or flops
--     reps = 10, budget_s = 60, out = "results/row_sums",
--   }
--   -- run128(p, state): the timed work for point p; r.rows: one row per point and case
--
-- Each point and case runs `warmup` times, then `reps` times between events on the device's
-- queue (inside an NVTX range named "<name> <case> <point>", so that nsys and ncu find it).
-- A row holds the axes' values, the case, the median time, the spread of the repetitions
-- (min to max, and the half-width of the middle half, as % of the median), and with `bytes`
-- GB/s and % of the device-to-device copy bandwidth measured in the same run, with `flops`
-- TFLOP/s and % of `peak_tflops` when given. On the simulator the times are the CPU's: the table
-- says so and has no % of copy. `reference` (a CSV file with the axes' columns and a `ms`
-- column, PyTorch's say) adds its time and the ratio beside each row it has a line for.
-- `budget_s` stops the sweep once spent, listing the points not run. A sweep longer than a few
-- seconds shows its progress, the time spent and an estimate of the time left on stderr.
local device = require "tocha.device"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}

-- Wall-clock seconds, for the budget and the progress line (whole seconds are enough there).
local clock = os.time

local function median(sorted)
  local n = #sorted
  return n % 2 == 1 and sorted[(n + 1) / 2] or (sorted[n / 2] + sorted[n / 2 + 1]) / 2
end

-- The points of the grid: the first axis varies slowest.
local function points(axes)
  local out = { {} }
  for _, axis in ipairs(axes) do
    local grown = {}
    for _, p in ipairs(out) do
      for _, v in ipairs(axis[2]) do
        local q = {}
        for k, x in pairs(p) do q[k] = x end
        q[axis[1]] = v
        grown[#grown + 1] = q
      end
    end
    out = grown
  end
  return out
end

local function point_text(axes, p)
  local parts = {}
  for _, axis in ipairs(axes) do parts[#parts + 1] = axis[1] .. "=" .. tostring(p[axis[1]]) end
  return table.concat(parts, " ")
end

-- The timed region of one point and case: reps runs between events, in an NVTX range.
local function time_case(dev, label, fn, p, state, warmup, reps)
  local tocha = require "tocha"
  for _ = 1, warmup do fn(p, state) end
  local events = {}
  tocha.nvtx.range(label, function()
    for r = 1, reps do
      events[r] = { tocha.event(dev.name), tocha.event(dev.name) }
      events[r][1]:record()
      fn(p, state)
      events[r][2]:record()
    end
  end)
  local times, total = {}, 0
  for r = 1, reps do
    times[r] = events[r][1]:elapsed(events[r][2])
    total = total + times[r]
  end
  table.sort(times)
  return times, total
end

-- device-to-device copy bandwidth in GB/s (read plus written), over 256 MiB.
local function copy_gbps(dev)
  local tocha = require "tocha"
  local n = 64 * 2 ^ 20
  local src = tocha.empty({ n }, { device = dev.name })
  local dst = tocha.empty({ n }, { device = dev.name })
  src:fill(1)
  local times = time_case(dev, "tocha.sweep copy", function() dst:copy(src) end, nil, nil, 3, 10)
  src:free()
  dst:free()
  return 2 * n * 4 / (median(times) * 1e6)
end

-- A CSV file's rows as tables of strings, by the header's names.
local function read_csv(path)
  local f = io.open(path, "r")
  if not f then raise(("reference: cannot read %s"):format(path)) end
  local header, rows = nil, {}
  for line in f:lines() do
    local cells = {}
    for cell in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = cell end
    if not header then
      header = cells
    else
      local row = {}
      for i, name in ipairs(header) do row[name] = cells[i] end
      rows[#rows + 1] = row
    end
  end
  f:close()
  return rows
end

local function reference_ms(rows, axes, p, case)
  for _, r in ipairs(rows) do
    local match = r.case == nil or r.case == case
    for _, axis in ipairs(axes) do
      if r[axis[1]] ~= tostring(p[axis[1]]) then match = false end
    end
    if match then return tonumber(r.ms) end
  end
end

local function fmt(v, digits)
  if v == nil then return "" end
  if type(v) == "number" then
    if v == math.floor(v) and math.abs(v) < 1e15 then return ("%d"):format(v) end
    return (("%." .. (digits or 4) .. "g"):format(v))
  end
  return tostring(v)
end

-- The result's columns: the axes, the case, then the figures that were measured.
local function columns_of(r)
  local cols = {}
  for _, axis in ipairs(r.axes) do cols[#cols + 1] = axis[1] end
  cols[#cols + 1] = "case"
  for _, c in ipairs({ "ms", "min_ms", "max_ms", "spread_pct", "gbps", "pct_copy", "tflops", "pct_peak", "ref_ms", "ratio" }) do
    for _, row in ipairs(r.rows) do
      if row[c] ~= nil then
        cols[#cols + 1] = c
        break
      end
    end
  end
  return cols
end

local function write_file(path, text)
  local f = io.open(path, "w")
  if not f then raise(("out: cannot write %s"):format(path)) end
  f:write(text)
  f:close()
end

local HEADINGS = { ms = "median ms", min_ms = "min ms", max_ms = "max ms", spread_pct = "± %", gbps = "GB/s",
  pct_copy = "% of copy", tflops = "TFLOP/s", pct_peak = "% of peak", ref_ms = "reference ms", ratio = "reference / ms" }

-- The result as Markdown: a line on the device and the noise, then the table.
function M.markdown(r)
  local cols = columns_of(r)
  local lines = { ("%s on %s (%s)%s; median of %d runs, ± the half-width of the middle half of them"):format(r.name,
    r.device, r.product, r.kind == "sim" and ", CPU times of the simulator (no % of copy)" or "", r.reps) }
  if r.copy_gbps then lines[#lines + 1] = ("device-to-device copy in this run: %.1f GB/s"):format(r.copy_gbps) end
  lines[#lines + 1] = ""
  local head, rule = {}, {}
  for i, c in ipairs(cols) do
    head[i] = HEADINGS[c] or c
    rule[i] = "---"
  end
  lines[#lines + 1] = "| " .. table.concat(head, " | ") .. " |"
  lines[#lines + 1] = "| " .. table.concat(rule, " | ") .. " |"
  for _, row in ipairs(r.rows) do
    local cells = {}
    for i, c in ipairs(cols) do cells[i] = fmt(row[c]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  if #r.skipped > 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = ("not run (the %g s budget was spent): %s"):format(r.budget_s, table.concat(r.skipped, "; "))
  end
  return table.concat(lines, "\n") .. "\n"
end

function M.csv(r)
  local cols = columns_of(r)
  local lines = { table.concat(cols, ",") }
  for _, row in ipairs(r.rows) do
    local cells = {}
    for i, c in ipairs(cols) do cells[i] = fmt(row[c], 6) end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- A gnuplot script drawing the median time over the first axis, a line per case and values of
-- the other axes, from the CSV file beside it.
local function gnuplot_script(r, csv_name, png_name)
  local x = r.axes[1][1]
  local cols = columns_of(r)
  local index = {}
  for i, c in ipairs(cols) do index[c] = i end
  local series, seen = {}, {}
  for _, row in ipairs(r.rows) do
    local parts = { row.case }
    for i = 2, #r.axes do parts[#parts + 1] = r.axes[i][1] .. "=" .. tostring(row[r.axes[i][1]]) end
    local label = table.concat(parts, " ")
    if not seen[label] then
      seen[label] = true
      local cond = { ('strcol(%d) eq "%s"'):format(index.case, row.case) }
      for i = 2, #r.axes do
        cond[#cond + 1] = ('strcol(%d) eq "%s"'):format(index[r.axes[i][1]], fmt(row[r.axes[i][1]], 6))
      end
      series[#series + 1] = ('"%s" using %d:(%s ? $%d : NaN) with linespoints title "%s"'):format(csv_name, index[x],
        table.concat(cond, " && "), index.ms, label)
    end
  end
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(r.axes[1][2]) do
    if type(v) == "number" then lo, hi = math.min(lo, v), math.max(hi, v) end
  end
  return table.concat({
    "set terminal pngcairo size 1000,600",
    lo > 0 and hi >= 100 * lo and "set logscale x" or "",
    ('set output "%s"'):format(png_name),
    'set datafile separator ","',
    "set key autotitle columnhead",
    "set logscale y",
    ('set xlabel "%s"'):format(x),
    ('set ylabel "median ms%s"'):format(r.kind == "sim" and " (CPU, simulator)" or ""),
    ('set title "%s on %s"'):format(r.name, r.device),
    "plot " .. table.concat(series, ", \\\n     "),
  }, "\n") .. "\n"
end

local function gnuplot_available()
  local p = io.popen("command -v gnuplot 2>/dev/null")
  local found = p:read("*l")
  p:close()
  return found ~= nil and found ~= ""
end

-- Writes <out>/<name>.md, .csv and .gp, and .png when gnuplot is on PATH; returns the paths
-- written (plot = nil, with plot_note saying why, when no plot was drawn).
function M.write(r, out)
  os.execute("mkdir -p '" .. out:gsub("'", "'\\''") .. "'")
  local base = out .. "/" .. r.name
  local files = { markdown = base .. ".md", csv = base .. ".csv", gnuplot = base .. ".gp" }
  write_file(files.markdown, M.markdown(r))
  write_file(files.csv, M.csv(r))
  write_file(files.gnuplot, gnuplot_script(r, r.name .. ".csv", r.name .. ".png"))
  if #r.rows == 0 then
    files.plot_note = "no rows to plot"
  elseif not gnuplot_available() then
    files.plot_note = "gnuplot is not on PATH: run it on " .. files.gnuplot
  else
    local cmd = ("cd '%s' && gnuplot '%s.gp' 2>&1"):format(out:gsub("'", "'\\''"), r.name)
    local p = io.popen(cmd)
    local said = p:read("*a")
    p:close()
    local f = io.open(base .. ".png", "rb")
    if f then
      f:close()
      files.plot = base .. ".png"
    else
      files.plot_note = "gnuplot failed: " .. said
    end
  end
  return files
end

local FIELDS = { name = true, axes = true, cases = true, run = true, setup = true, teardown = true, bytes = true,
  flops = true, peak_tflops = true, reps = true, warmup = true, budget_s = true, reference = true, out = true,
  device = true, progress = true }

local function check_spec(spec)
  if type(spec) ~= "table" then raise("expected a table {name=, axes=, run= or cases=}") end
  for k in pairs(spec) do
    if not FIELDS[k] then
      raise(("%s: unknown field (expected name, axes, cases, run, setup, teardown, bytes, flops, peak_tflops, reps, "
        .. "warmup, budget_s, reference, out, device and progress)"):format(errors.show(k)))
    end
  end
  if type(spec.name) ~= "string" or not spec.name:match("^[%w_.-]+$") then
    raise("name: expected a name of letters, digits, '_', '.' and '-', got " .. errors.show(spec.name))
  end
  if type(spec.axes) ~= "table" or #spec.axes == 0 then raise("axes: expected a list of {name, {values...}}") end
  for i, axis in ipairs(spec.axes) do
    if type(axis) ~= "table" or type(axis[1]) ~= "string" or type(axis[2]) ~= "table" or #axis[2] == 0 then
      raise(("axes[%d]: expected {name, {values...}}"):format(i))
    end
  end
  if (spec.run == nil) == (spec.cases == nil) then raise("expected run (one case) or cases (named), not both") end
  for _, f in ipairs({ "run", "setup", "teardown", "bytes", "flops" }) do
    if spec[f] ~= nil and type(spec[f]) ~= "function" then raise(("%s: expected a function, got %s"):format(f, type(spec[f]))) end
  end
  if spec.cases ~= nil then
    if type(spec.cases) ~= "table" or next(spec.cases) == nil then raise("cases: expected a table of named functions") end
    for k, v in pairs(spec.cases) do
      if type(k) ~= "string" or type(v) ~= "function" then raise(("cases: %s: expected a function"):format(errors.show(k))) end
    end
  end
  for _, f in ipairs({ "reps", "warmup" }) do
    local v = spec[f]
    if v ~= nil and (type(v) ~= "number" or v ~= math.floor(v) or v < (f == "reps" and 1 or 0) or v > 100000) then
      raise(("%s: expected a whole number, got %s"):format(f, errors.show(v)))
    end
  end
  if spec.budget_s ~= nil and (type(spec.budget_s) ~= "number" or spec.budget_s < 0) then
    raise("budget_s: expected a number of seconds >= 0, got " .. errors.show(spec.budget_s))
  end
end

-- tocha.sweep{...}: runs the sweep and returns {name, device, product, kind, reps, copy_gbps,
-- axes, rows, skipped, budget_s, files}; see the header.
function M.run(spec)
  check_spec(spec)
  local dev = device.get(spec.device)
  local cases = {}
  if spec.run then
    cases[1] = { "tocha", spec.run }
  else
    for name, fn in pairs(spec.cases) do cases[#cases + 1] = { name, fn } end
    table.sort(cases, function(a, b) return a[1] < b[1] end)
  end
  local reps, warmup = spec.reps or 10, spec.warmup or 2
  local budget = spec.budget_s or math.huge
  local refs = spec.reference and read_csv(spec.reference)
  local r = { name = spec.name, device = dev.name, product = dev.product, kind = dev.kind, reps = reps, axes = spec.axes,
    rows = {}, skipped = {}, budget_s = budget }
  local start = clock()
  if dev.kind ~= "sim" and spec.bytes then r.copy_gbps = copy_gbps(dev) end
  local grid = points(spec.axes)
  local total = #grid * #cases
  local done, shown = 0, false
  local progress = spec.progress ~= false
  for _, p in ipairs(grid) do
    local text = point_text(spec.axes, p)
    if clock() - start >= budget then
      r.skipped[#r.skipped + 1] = text
    else
      local state = spec.setup and spec.setup(p)
      for _, case in ipairs(cases) do
        local times, _ = time_case(dev, ("%s %s %s"):format(spec.name, case[1], text), case[2], p, state, warmup, reps)
        local ms = median(times)
        local q1, q3 = times[math.max(1, math.floor(#times / 4 + 0.5))], times[math.max(1, math.ceil(3 * #times / 4))]
        local row = { case = case[1], ms = ms, min_ms = times[1], max_ms = times[#times],
          spread_pct = ms > 0 and 100 * (q3 - q1) / 2 / ms or 0 }
        for k, v in pairs(p) do row[k] = v end
        local function amount(f, what)
          local v = f(p)
          if type(v) ~= "number" or v < 0 or v ~= v then
            raise(("%s: expected a number from %s(point), got %s"):format(what, what, errors.show(v)))
          end
          return v
        end
        if spec.bytes then
          row.gbps = amount(spec.bytes, "bytes") / (ms * 1e6)
          if r.copy_gbps then row.pct_copy = 100 * row.gbps / r.copy_gbps end
        end
        if spec.flops then
          row.tflops = amount(spec.flops, "flops") / (ms * 1e9)
          if spec.peak_tflops then row.pct_peak = 100 * row.tflops / spec.peak_tflops end
        end
        if refs then
          row.ref_ms = reference_ms(refs, spec.axes, p, case[1])
          if row.ref_ms then row.ratio = row.ref_ms / ms end
        end
        r.rows[#r.rows + 1] = row
        done = done + 1
        local spent = clock() - start
        if progress and (shown or spent > 3) and done < total then
          shown = true
          io.stderr:write(("\r%s: %d/%d, %.0f s spent, about %.0f s left   "):format(spec.name, done, total, spent,
            spent / done * (total - done)))
        end
      end
      if spec.teardown then spec.teardown(p, state) end
    end
  end
  if shown then io.stderr:write("\n") end
  if spec.out then r.files = M.write(r, spec.out) end
  return r
end

errors.name(M.run, "sweep")
return M
