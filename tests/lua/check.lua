--- check: the assertion helper of mechlab's Lua tests.
--
--   local T = require "check"
--   T.test("zeros has the right shape", function()
--     T.eq(mech.zeros(2, 3):shape(), {2, 3})
--   end)
--   T.test("bad size is an error", function()
--     T.raises(function() mech.zeros(-1) end, "expected a size >= 0")
--   end)
--   T.done()   -- prints "N passed, N failed" and exits 0 only if nothing failed
--
-- Each test runs under xpcall, so a failing assertion or an unexpected error fails that test
-- (its message and traceback are printed) and the next test still runs. Assertions raise at
-- the caller's line, so the message points into the test file.
local T = {}

local passed, failed = 0, 0

-- Compact rendering of values for failure messages (tables one level deep, sorted keys).
local function show(v, depth)
  depth = depth or 0
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) ~= "table" or depth > 1 then return tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  local parts, keys = {}, {}
  for i = 1, #v do parts[#parts + 1] = show(v[i], depth + 1) end
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= #v) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do parts[#parts + 1] = "[" .. show(k, 2) .. "]=" .. show(v[k], depth + 1) end
  return "{" .. table.concat(parts, ", ") .. "}"
end
T.show = show

local function fail(msg, default)
  error((msg and msg .. ": " or "") .. default, 3)
end

-- Deep equality: tables compare by contents (raw keys and values, recursively), everything
-- else with ==. Integer 2 equals float 2.0, as in Lua.
local function equal(a, b, seen)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  for k, v in pairs(a) do
    if not equal(v, b[k], seen) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end
T.equal = equal

--- Runs fn as the test called name; failures are counted, printed and do not stop the file.
-- MECHLAB_TEST_ONLY=text runs only the tests whose names contain text (for profiling one test).
local only = os.getenv("MECHLAB_TEST_ONLY")

function T.test(name, fn)
  if only and not name:find(only, 1, true) then return true end
  local t0 = mech.sys.time()
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    passed = passed + 1
    -- the wall time, so that a slow test shows in CI's log (ctest --output-on-failure -V)
    print(string.format("ok    %s  (%.1f s)", name, mech.sys.time() - t0))
  else
    failed = failed + 1
    print("FAIL  " .. name .. "\n      " .. tostring(err):gsub("\n", "\n      "))
  end
  return ok
end

--- a equals b (deeply for tables).
function T.eq(a, b, msg)
  if not equal(a, b) then fail(msg, "expected " .. show(b) .. ", got " .. show(a)) end
end

--- |a - b| <= tol (default 1e-6) for numbers, elementwise for (nested) tables of numbers.
function T.near(a, b, tol, msg)
  tol = tol or 1e-6
  local function walk(x, y, path)
    if type(x) == "table" and type(y) == "table" then
      if #x ~= #y then fail(msg, path .. "length " .. #x .. " ~= " .. #y) end
      for i = 1, #y do walk(x[i], y[i], path .. "[" .. i .. "]") end
    elseif type(x) ~= "number" or type(y) ~= "number" then
      fail(msg, path .. "expected a number near " .. show(y) .. ", got " .. show(x))
    elseif not (math.abs(x - y) <= tol) then -- written so that NaN fails
      fail(msg, string.format("%sexpected %.9g within %g, got %.9g", path, y, tol, x))
    end
  end
  walk(a, b, "")
end

--- v is neither nil nor false.
function T.truthy(v, msg)
  if not v then fail(msg, "expected a true value, got " .. show(v)) end
  return v
end

--- v is nil or false.
function T.falsy(v, msg)
  if v then fail(msg, "expected nil or false, got " .. show(v)) end
end

--- fn(...) raises an error whose message contains pattern, as a plain substring or as a Lua
--- pattern. Returns the message, for further checks.
function T.raises(fn, pattern, msg)
  local ok, err = pcall(fn)
  if ok then fail(msg, "expected an error" .. (pattern and " matching " .. show(pattern) or "")) end
  err = tostring(err)
  if pattern and not err:find(pattern, 1, true) then
    local found, match = pcall(string.find, err, pattern)
    if not (found and match) then
      fail(msg, "error " .. show(err) .. " does not match " .. show(pattern))
    end
  end
  return err
end

--- Prints the closing line "N passed, N failed" and exits (status 1 if anything failed).
function T.done()
  io.stdout:write(string.format("%d passed, %d failed\n", passed, failed))
  io.stdout:flush()
  os.exit(failed == 0 and 0 or 1)
end

return T
