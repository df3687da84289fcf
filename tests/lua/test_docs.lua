-- Every ```lua block of README.md and docs/*.md runs as pasted.
--
-- A page's blocks run in order in one fresh mechlab process, as one chunk (a later block may use
-- what an earlier one defined, as in a REPL session), in a temporary directory that links the
-- repository's experiments/, plots/ and tests/ (so examples read the files they name) and has
-- an empty docs/img/ (so examples write their figures there, not into the repository). A block that is deliberately a fragment is fenced ```lua fragment
-- and only checked to compile. A page's blocks must finish within `limit` seconds.
--   mechlab tests/lua/test_docs.lua [page.md ...]
local T = require "check"

local function cwd()
  local p = io.popen("pwd")
  local d = p:read("l")
  p:close()
  return d
end
local root = cwd() -- the repository (CTest runs the Lua tests there)
local limit = 300

local function read(path) return assert(mech.sys.read_file(path)) end

-- The ```lua blocks of a page: {code, line (of the fence), fragment}.
local function blocks(text)
  local list, n, open = {}, 0, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if open then
      if line:match("^%s*```%s*$") then
        list[#list + 1] = open
        open = nil
      else
        open.lines[#open.lines + 1] = line
      end
    else
      local info = line:match("^%s*```lua(.*)$")
      if info then open = { lines = {}, line = n, fragment = info:match("fragment") ~= nil } end
    end
  end
  for _, b in ipairs(list) do b.code = table.concat(b.lines, "\n") end
  return list
end

local function pages()
  local list = {}
  if #arg > 0 then
    for _, p in ipairs(arg) do list[#list + 1] = p end
    return list
  end
  list[1] = "README.md"
  local p = io.popen("ls " .. root .. "/docs/*.md")
  for path in p:read("a"):gmatch("[^\n]+") do list[#list + 1] = path:sub(#root + 2) end
  p:close()
  return list
end

local shell_quote = require("mech.util").shell_quote

for _, page in ipairs(pages()) do
  local list = blocks(read(root .. "/" .. page))
  local run, fragments = {}, {}
  for _, b in ipairs(list) do table.insert(b.fragment and fragments or run, b) end
  for _, b in ipairs(fragments) do
    T.test(string.format("%s:%d (fragment) compiles", page, b.line), function()
      local f, err = load(b.code, "=" .. page .. ":" .. b.line)
      T.truthy(f, err)
    end)
  end
  if #run > 0 then
    T.test(string.format("%s: its %d lua block(s) run", page, #run), function()
      local dir = os.tmpname()
      os.remove(dir)
      mech.sys.mkdir(dir)
      for _, d in ipairs { "experiments", "plots", "tests" } do
        os.execute(string.format("ln -s %s %s", shell_quote(root .. "/" .. d), shell_quote(dir .. "/" .. d)))
      end
      mech.sys.mkdir(dir .. "/docs/img") -- where the figure examples write, here and not in the repository
      -- one chunk; each block is introduced by a comment so that errors can be traced to it
      -- one chunk, each block on one line of its own; messages name the page's lines
      local code, starts, n = {}, {}, 0
      for _, b in ipairs(run) do
        code[#code + 1] = b.code
        starts[#starts + 1] = { chunk = n + 1, page = b.line + 1 }
        n = n + #b.lines
      end
      local function page_line(l)
        l = tonumber(l)
        for i = #starts, 1, -1 do
          if l >= starts[i].chunk then return page .. ":" .. (starts[i].page + l - starts[i].chunk) end
        end
        return page .. ":?"
      end
      mech.sys.write_atomic(dir .. "/doc.lua", table.concat(code, "\n") .. "\n")
      local cmd = string.format("cd %s && timeout %d %s doc.lua 2>&1", shell_quote(dir), limit, shell_quote(mech.sys.executable()))
      local p = io.popen(cmd)
      local out = p:read("a")
      local ok, _, code_ = p:close()
      os.execute("rm -rf " .. shell_quote(dir))
      out = out:gsub("doc%.lua:(%d+)", page_line)
      T.truthy(ok, string.format("exit %s; the output ends with:\n%s", tostring(code_), out:sub(-3000)))
    end)
  end
end

T.done()
