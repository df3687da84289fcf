--- Text to token ids (task:to_tokens), for any task: built-in, written in Lua or read from a file.
local D = require "mech.task_custom.definition"

local M = {}
local fail, definition = D.fail, D.of

--- task:to_tokens(text | {text, ...}) -> int32 (B, Lmax), right-padded with PAD (0): tokens
--- separated by spaces, each a name of the task's vocabulary (or an id where tokens have no names).
function M.to_tokens(task, x)
  local fn = "task:to_tokens"
  if type(task) ~= "userdata" or not tostring(task):match("^mech%.Task") then
    fail(fn, "argument 1 expected a mech.Task, got " .. type(task))
  end
  local rows = type(x) == "string" and { x } or x
  if type(rows) ~= "table" or #rows == 0 then
    fail(fn, "argument 1 expected a string of tokens or a non-empty list of them, got " .. type(x))
  end
  local d, ids = definition(task), nil
  if d then ids = d.ids end
  if not ids and not (d and not d.names) then
    ids = {}
    for i = 0, task:vocab_size() - 1 do ids[task:token_name(i)] = i end
  end
  local V, out, L = task:vocab_size(), {}, 0
  for r, row in ipairs(rows) do
    local words = row
    if type(row) == "string" then
      words = {}
      for w in row:gmatch("%S+") do words[#words + 1] = w end
    elseif type(row) ~= "table" then
      fail(fn, string.format("entry %d expected a string of tokens or a list of token names, got %s", r, type(row)))
    end
    local ids_row = {}
    for j, w in ipairs(words) do
      local id = ids and ids[w]
      if not ids then
        id = math.tointeger(tonumber(w))
        if id and (id < 0 or id >= V) then id = nil end
      end
      if not id then
        fail(fn, string.format("unknown token '%s' (row %d, token %d): not in the vocabulary of task '%s'",
          tostring(w):sub(1, 40), r, j, task:name()))
      end
      ids_row[j] = id
    end
    if #ids_row == 0 then fail(fn, string.format("entry %d holds no token", r)) end
    out[r] = ids_row
    if #ids_row > L then L = #ids_row end
  end
  for _, row in ipairs(out) do for j = #row + 1, L do row[j] = mech.task.PAD end end
  return mech.tensor(out, { dtype = "int32" })
end

return M
