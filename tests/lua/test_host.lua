-- The host as a script sees it: arg table, preloaded mech, package.path, and check itself.
-- Run as: mechlab tests/lua/test_host.lua (CTest sets LUA_PATH to find check.lua).
local T = require "check"
local nvarargs = select("#", ...)

T.test("arg table: arg[0] is the script, no arguments", function()
  T.truthy(arg[0]:find("test_host.lua", 1, true), "arg[0]")
  T.eq(#arg, 0)
  T.truthy(arg[-1]:find("mechlab", 1, true), "arg[-1] is the interpreter")
  T.eq(nvarargs, 0, "script varargs")
end)

T.test("mech is preloaded, global and required", function()
  T.eq(type(mech), "table")
  T.eq(require "mech", mech)
  T.eq(package.loaded.mech, mech)
end)

T.test("package.path starts with mechlab's lua directory", function()
  local first = package.path:match("^[^;]+")
  T.truthy(first:find("/?.lua", 1, true), first)
  T.truthy(package.path:find("tests/lua/?.lua", 1, true), "LUA_PATH is honoured")
end)

T.test("Lua 5.4 with the standard libraries", function()
  T.eq(_VERSION, "Lua 5.4")
  for _, lib in ipairs {"string", "table", "math", "io", "os", "coroutine", "utf8", "debug"} do
    T.eq(type(_G[lib]), "table", lib)
  end
end)

T.test("check: eq compares tables deeply", function()
  T.eq({1, {2, a = "x"}}, {1, {2, a = "x"}})
  T.eq(2, 2.0)
  T.raises(function() T.eq({1, 2}, {1, 3}) end, "expected {1, 3}, got {1, 2}")
  T.raises(function() T.eq({1}, {1, nil, 3}) end, "expected")
end)

T.test("check: near, truthy, falsy", function()
  T.near(0.1 + 0.2, 0.3)
  T.near({1, {2, 3}}, {1.0000001, {2, 3}}, 1e-5)
  T.raises(function() T.near(1, 1.1, 1e-3) end, "within 0.001")
  T.raises(function() T.near(0 / 0, 0) end, "expected 0 within")
  T.raises(function() T.near({1}, {1, 2}) end, "length 1 ~= 2")
  T.eq(T.truthy(5), 5)
  T.raises(function() T.truthy(nil, "needed") end, "needed: expected a true value, got nil")
  T.falsy(false)
  T.raises(function() T.falsy(0) end, "expected nil or false")
end)

T.test("check: raises matches plain text or a pattern and returns the message", function()
  local msg = T.raises(function() error("shape [3,4] (x)") end, "shape [3,4] (x)")
  T.truthy(msg:find("shape", 1, true))
  T.raises(function() error("size 12") end, "size %d+")
  T.raises(function() T.raises(function() end) end, "expected an error")
  T.raises(function() T.raises(function() error("abc") end, "xyz") end, "does not match \"xyz\"")
  T.raises(function() error({}) end) -- non-string error objects are accepted
end)

T.test("check: failures point at the caller's line", function()
  local msg = T.raises(function() T.eq(1, 2) end)
  T.truthy(msg:find("test_host.lua:%d+: expected 2, got 1"), msg)
end)

T.test("check: a failing test is counted, the file goes on, done() exits 1", function()
  local dir = arg[0]:match("^(.*)/[^/]*$") or "."
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write('package.path = ', string.format("%q", dir .. "/?.lua;"), ' .. package.path\n',
          'local T = require "check"\n',
          'T.test("good", function() T.eq(1, 1) end)\n',
          'T.test("bad", function() error("inner failure") end)\n',
          'T.test("after", function() end)\n',
          'T.done()\n')
  f:close()
  local p = io.popen(string.format("%q %q 2>&1", arg[-1], tmp))
  local out = p:read("a")
  local ok, how, code = p:close()
  os.remove(tmp)
  T.truthy(out:find("ok    good", 1, true), out)
  T.truthy(out:find("FAIL  bad", 1, true), out)
  T.truthy(out:find("inner failure", 1, true), out)
  T.truthy(out:find("\n2 passed, 1 failed\n$"), out)
  T.eq({ok, how, code}, {nil, "exit", 1})
end)

T.test("mech.pp formats values as the REPL prints them", function()
  local pp = require "mech.pp"
  T.eq(pp.format(1, "a", nil), "1\ta\tnil")
  T.eq(pp.format({1, 2, x = "s", ["not ok"] = true}), '{1, 2, ["not ok"] = true, x = "s"}')
  T.eq(pp.format({{{1}}}), "{{{...}}}")
  local long = {}
  for i = 1, 40 do long[i] = i end
  T.truthy(pp.format(long):find("... (10 more)}", 1, true))
  local cyc = {}
  cyc.self = cyc
  T.eq(pp.format(cyc), "{self = <cycle>}")
end)

T.done()
