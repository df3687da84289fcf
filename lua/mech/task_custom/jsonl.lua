--- Tasks read from a JSON-lines file (mech.task.from_jsonl: an optional header with the
--- vocabulary, positions, corruption pool and name, then one document a line, every line checked
--- when read) and datasets written back to that format (ds:write_jsonl).
local C = require "mech.task_c"
local json = require "mech.json"
local util = require "mech.util"
local D = require "mech.task_custom.definition"

local M = {}
local fail, definition, position_set = D.fail, D.of, D.position_set

local jsonl_keys = { vocab = 1, positions = 1, corrupt = 1, holdout = 1, name = 1, seed = 1 }
local splits = { train = true, dev = true, test = true }

M.DATA_BYTES = 256 * 1024 * 1024 -- the most a JSON-lines task file may hold (docs/security.md)

--- mech.task.from_jsonl(path, [{vocab=, positions=, corrupt=, holdout=, name=, seed=}]) (dir: a
--- record's directory, which the file must lie below: from_spec's option)
function M.from_jsonl(path, opts, dir)
  local fn = "mech.task.from_jsonl"
  if type(path) ~= "string" then fail(fn, "argument 1 expected a file path, got " .. type(path)) end
  opts = opts or {}
  if type(opts) ~= "table" then fail(fn, "argument 2 expected a table of options, got " .. type(opts)) end
  D.check_keys(fn, opts, jsonl_keys)
  D.check_data(opts, "argument 2", fn)
  -- a regular file within the bound (a FIFO or /dev/zero never), below dir when a record names it
  local text, err = C.read_data(path, dir, M.DATA_BYTES)
  if not text then fail(fn, err) end
  local docs, header, lineno = {}, nil, 0
  for line in text:gmatch("([^\n]*)\n?") do
    lineno = lineno + 1
    if line:find("%S") then
      local ok, v = pcall(json.decode, line)
      if not ok then fail(fn, string.format("%s:%d: %s", path, lineno, v)) end
      if type(v) ~= "table" or v[1] ~= nil then
        fail(fn, string.format("%s:%d: expected a JSON object", path, lineno))
      end
      if v.tokens == nil and v.vocab ~= nil and #docs == 0 and not header then
        header = v
      else
        local split = v.split
        if split ~= nil and not splits[split] then
          fail(fn, string.format("%s:%d: field 'split' expected \"train\", \"dev\" or \"test\", got %s", path, lineno,
            tostring(split)))
        end
        v.split = nil
        docs[#docs + 1] = { doc = v, split = split, line = lineno }
      end
    end
  end
  if #docs == 0 then fail(fn, path .. " holds no document") end
  -- the vocabulary: given, else the file's header, else the tokens seen (names in order of first
  -- appearance, or ids 0 .. the largest)
  local vocab = opts.vocab or header and header.vocab
  if vocab == nil then
    local names, seen, max_id = {}, {}, -1
    local function see(x)
      if type(x) == "string" and not seen[x] then seen[x] = true names[#names + 1] = x end
      if math.type(x) == "integer" and x > max_id then max_id = x end
    end
    for _, e in ipairs(docs) do
      for _, x in ipairs(type(e.doc.tokens) == "table" and e.doc.tokens or {}) do see(x) end
      for _, x in ipairs(type(e.doc.answers) == "table" and e.doc.answers or {}) do see(x) end
    end
    if #names > 0 and max_id >= 0 then fail(fn, path .. " mixes token ids and token names; give option 'vocab'") end
    vocab = #names > 0 and names or max_id + 1
  end
  local positions = opts.positions or header and header.positions
  if positions == nil then -- those the documents carry: the paper's in mech.task.positions order, then the others by name
    local used, others = {}, {}
    for _, e in ipairs(docs) do
      for k in pairs(type(e.doc.positions) == "table" and e.doc.positions or {}) do
        if not used[k] and k ~= "all_target_items_orig" and not position_set[k] then others[#others + 1] = k end
        used[k] = true
      end
    end
    positions = {}
    for _, p in ipairs(mech.task.positions) do if used[p] then positions[#positions + 1] = p end end
    table.sort(others, function(a, b) return tostring(a) < tostring(b) end)
    for _, p in ipairs(others) do positions[#positions + 1] = p end
  end
  local name = opts.name or header and header.name or (path:match("([^/]+)$"):gsub("%.jsonl?$", ""):gsub("[^%w_%.%-]", "_"):sub(1, 31))
  local def = { vocab = vocab, positions = positions, corrupt = opts.corrupt or header and header.corrupt,
    holdout = opts.holdout, seed = opts.seed }
  local record = util.copy(opts)
  record.name, record.seed = nil, nil
  local task = D.make(fn, "jsonl", name, def, { docs = docs, path = path, options = record })
  -- every line is checked now, so that a bad one is reported with its line number before any use
  local ds, _, scratch = C.open(task, #docs, 0, "train")
  for _, e in ipairs(docs) do
    local ok, msg = pcall(C.append, ds, e.doc, scratch)
    if not ok then fail(fn, string.format("%s:%d: %s", path, e.line, msg)) end
  end
  return task
end

--- ds:write_jsonl(path): the dataset as JSON lines (a header with the vocabulary, then one
--- document per line: tokens, readouts, answers, positions, split), written atomically.
function M.write_jsonl(ds, path)
  local fn = "dataset:write_jsonl"
  if type(ds) ~= "userdata" or not tostring(ds):match("^mech%.Dataset") then
    fail(fn, "argument 1 expected a mech.Dataset, got " .. type(ds))
  end
  if type(path) ~= "string" then fail(fn, "argument 2 expected a file path, got " .. type(path)) end
  local task = ds:task()
  local d = definition(task)
  local V, names = task:vocab_size(), d and d.names -- a Lua task's own names (C's are cut at 31 bytes)
  if not names then
    names = {}
    for i = 0, V - 1 do names[i + 1] = task:token_name(i) end
  end
  local positions, declared = {}, {}
  local parts = { "" } -- the header, once the positions are known
  for i = 0, #ds - 1 do
    local doc = ds:doc(i)
    local pos = {}
    for k, v in pairs(doc.positions) do
      if k ~= "all_target_items_orig" then pos[k] = v; declared[k] = true
      elseif #v > 0 then pos[k] = v end
    end
    local line = { tokens = doc.tokens, readouts = doc.readouts, answers = doc.answers, positions = pos, split = doc.split }
    if doc.type ~= "KEY" then line.type = doc.type end
    parts[#parts + 1] = json.encode(line)
  end
  -- the task's order (the paper's eight, then its own names): a round trip keeps the columns
  if d then for _, p in ipairs(d.positions) do declared[p] = true end end
  for _, p in ipairs(task:positions()) do if declared[p] then positions[#positions + 1] = p end end
  local lo, hi = task:corrupt_range()
  local vocab = (d and not d.names) and V or names
  parts[1] = json.encode { vocab = vocab, positions = positions, corrupt = { lo, hi }, name = task:name() }
  mech.sys.write_atomic(path, table.concat(parts, "\n") .. "\n")
end

return M
