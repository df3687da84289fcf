-- References resolve: every section sign in the repository's text files is a citation of
-- docs/spec.md written `spec <sign>N[.N...]` (docs/spec.md itself cites its own headings with
-- the bare sign) and names a numbered heading there; and no file names a folder of the machine
-- it was written on (an absolute path under /work, /root or /home; generic ones such as /tmp,
-- /usr or /etc are fine). Prints each offence as path:line.
--   mechlab tests/lua/test_spec_refs.lua [ROOT]   (ROOT: another tree to check; default here)
-- The sign and the forbidden folders are spelled in escapes here so that this file passes its
-- own check.
local T = require "check"

local SIGN = "\xC2\xA7"                 -- the section sign, UTF-8
local FORBIDDEN = { "wo" .. "rk", "ro" .. "ot", "ho" .. "me" }
local SPEC = "docs/spec.md"

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local list = {}
  for l in p:lines() do list[#list + 1] = l end
  p:close()
  return list
end

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The files to check, relative to root: git's tracked and not-ignored files in a checkout, else
-- every file but .git and the ignored build and result folders at the top.
local function files(root)
  if mech.sys.exists(root .. "/.git") then
    local list = lines_of("git -C " .. quote(root) .. " ls-files -co --exclude-standard 2>/dev/null")
    if #list > 0 then return list end
  end
  local list = {}
  local prune = "\\( -path ./.git -o -path './build*' -o -path ./runs -o -path ./out -o -path ./results \\)"
  for _, l in ipairs(lines_of("cd " .. quote(root) .. " && find . " .. prune .. " -prune -o -type f -print")) do
    list[#list + 1] = l:gsub("^%./", "")
  end
  table.sort(list)
  return list
end

-- The numbers of docs/spec.md's headings ("## 5. Training" -> "5", "### 5.5 Suites" -> "5.5").
local function headings(text, problems)
  local set, n = {}, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local num = line:match("^#+%s+(%d[%d%.]*)")
    if num then
      num = num:gsub("%.$", "")
      if set[num] then problems[#problems + 1] = string.format("%s:%d: heading %s appears twice", SPEC, n, num) end
      set[num] = true
    end
  end
  return set
end

-- Problems in one file's text: bad citations (text files only) and machine paths (every file).
local function check_file(path, text, heads, problems)
  local binary = text:find("\0", 1, true) ~= nil
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    for _, dir in ipairs(FORBIDDEN) do
      local needle, from = "/" .. dir .. "/", 1
      while true do
        local s = line:find(needle, from, true)
        if not s then break end
        local before = line:sub(s - 1, s - 1)
        if before == "" or not before:match("[%w_%.%-]") then
          problems[#problems + 1] = string.format("%s:%d: names a folder of this machine (%s...)", path, n, needle)
        end
        from = s + 1
      end
    end
    if not binary then
      local from, first = 1, true
      while true do
        local s, e = line:find(SIGN, from, true)
        if not s then break end
        local num = line:match("^%d[%d%.]*", e + 1)
        if num then num = num:gsub("%.+$", "") end
        local cite = SIGN .. (num or line:sub(e + 1, e + 8))
        if first and path ~= SPEC and line:sub(s - 5, s - 1) ~= "spec " then
          problems[#problems + 1] = string.format("%s:%d: '%s' is not a citation 'spec %sN' of docs/spec.md"
            .. " (see its \"References\"; the paper's own sections are under spec %s8.2)", path, n, cite, SIGN, SIGN)
        elseif not num then
          problems[#problems + 1] = string.format("%s:%d: '%s' has no section number", path, n, cite)
        elseif not heads[num] then
          problems[#problems + 1] = string.format("%s:%d: 'spec %s' has no heading %s in docs/spec.md",
            path, n, cite, num)
        end
        first, from = false, e + 1
      end
    end
  end
end

-- Every problem of the tree at root, as "path:line: what".
local function check(root)
  local problems = {}
  local spec = read(root .. "/" .. SPEC)
  if not spec then return { SPEC .. ": missing" } end
  local heads = headings(spec, problems)
  for _, path in ipairs(files(root)) do
    local text = read(root .. "/" .. path)
    if text then check_file(path, text, heads, problems) end
  end
  return problems
end

-- A small tree to show that the check fails where it should.
local function tree(spec_text, others)
  local dir = os.tmpname()
  os.remove(dir)
  mech.sys.mkdir(dir .. "/docs")
  mech.sys.mkdir(dir .. "/src")
  local function put(rel, text)
    local f = assert(io.open(dir .. "/" .. rel, "wb"))
    f:write(text)
    f:close()
  end
  put(SPEC, spec_text)
  for rel, text in pairs(others) do put(rel, text) end
  return dir
end

local SPEC_TEXT = "# Spec\n## 1. One\n### 1.2 Two\nsee " .. SIGN .. "1.2.\n"

T.test("a tree whose citations resolve passes", function()
  local dir = tree(SPEC_TEXT, { ["src/a.c"] = "/* spec " .. SIGN .. "1.2 and " .. SIGN .. "1, in /tmp/x */\n" })
  T.eq(check(dir), {})
  os.execute("rm -rf " .. quote(dir))
end)

T.test("an unresolved citation, a citation in another form and a machine path are each caught", function()
  local dir = tree(SPEC_TEXT, {
    ["src/a.c"] = "ok\n/* spec " .. SIGN .. "1.3: no such heading */\n",
    ["src/b.lua"] = "-- paper " .. SIGN .. "1.2\n",
    ["src/c.py"] = "# from /ho" .. "me/someone/spec.md; spec " .. SIGN .. "x\n",
    ["src/d.bin"] = "\0 " .. SIGN .. "9 bytes of a binary are no citation\n",
  })
  local got = check(dir)
  table.sort(got)
  T.eq(#got, 4, table.concat(got, "\n"))
  T.truthy(got[1]:find("^src/a%.c:2: 'spec " .. SIGN .. "1%.3' has no heading 1%.3"), got[1])
  T.truthy(got[2]:find("^src/b%.lua:1: '" .. SIGN .. "1%.2' is not a citation"), got[2])
  T.truthy(got[3]:find("^src/c%.py:1: '" .. SIGN .. "x' has no section number"), got[3])
  T.truthy(got[4]:find("^src/c%.py:1: names a folder of this machine"), got[4])
  os.execute("rm -rf " .. quote(dir))
end)

T.test("a duplicated heading number and a missing spec are caught", function()
  local dir = tree("## 1. One\n## 1 Again\n", {})
  T.eq(check(dir), { "docs/spec.md:2: heading 1 appears twice" })
  os.remove(dir .. "/" .. SPEC)
  T.eq(check(dir), { "docs/spec.md: missing" })
  os.execute("rm -rf " .. quote(dir))
end)

T.test("every section reference of the repository resolves in docs/spec.md", function()
  local root = arg and arg[1] or "."
  local problems = check(root)
  for _, p in ipairs(problems) do print(p) end
  T.eq(#problems, 0, #problems .. " unresolved reference(s) or machine path(s), listed above")
end)

T.done()
