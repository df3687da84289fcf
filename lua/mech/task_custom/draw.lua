--- The datasets and samples of a task made outside C (task:dataset, task:sample): documents
--- drawn by its sample (or sample_batch) function, or a file task's documents, each checked in C
--- and stored in the same dataset storage as the built-in tasks', so batches and training steps
--- cost the same; a failure's message names the task, the document and the split.
local C = require "mech.task_c"
local D = require "mech.task_custom.definition"

local M = {}
local fail = D.fail

-- The documents a holdout may reject while n are drawn before it is hopeless.
local function rejection_limit(n) return 1000 + 100 * n end

-- Draws n documents with sample_batch: batches of at most the documents still missing (a batch
-- may hold fewer: a rejection sampler drops rows, a holdout rejects some), each checked row by row
-- in C.
local function draw_batches(task, d, ds, n, split, gen, scratch)
  local sample_batch, append_batch = d.sample_batch, C.append_batch
  local i, drawn, phase, row = 0, 0, "sample", nil
  local limit = rejection_limit(n)
  local ok, err = pcall(function()
    while i < n do
      phase = "sample"
      local want = n - i
      local batch = sample_batch(gen, split, want)
      phase = "batch"
      local kept, rows, msg = append_batch(ds, batch, scratch, want)
      if not kept then
        phase, row = "doc", rows
        error(msg, 0)
      end
      i, drawn = i + kept, drawn + rows
      if drawn - i > limit then
        phase = "holdout"
        error(string.format("%d documents drawn, %d kept", drawn, i), 0)
      end
    end
  end)
  if ok then return C.done(ds) end
  local where = string.format("task:dataset: task '%s'", task:name())
  if phase == "sample" then fail(where, string.format("its sample_batch function failed (%d documents asked, %d "
    .. "kept before): %s", n - i, i, tostring(err))) end
  if phase == "holdout" then
    fail(where, string.format("the holdout (%g) keeps almost no document of split %s (%s)", d.holdout, split, err))
  end
  if phase == "batch" then fail(where, string.format("the batch of documents %d.. of split %s is wrong: %s", i, split,
    tostring(err))) end
  fail(string.format("%s, document %d of split %s (row %d of its batch)", where, #ds, split, row),
    "the sample_batch function's document is wrong: " .. tostring(err))
end

-- Draws n documents of split into a dataset: the sample function's, checked one by one (or the
-- batched form's when the task has one).
local function draw(task, d, n, seed, split, gen)
  local ds, own, scratch = C.open(task, n, seed, split)
  gen = gen or own
  if d.sample_batch then return draw_batches(task, d, ds, n, split, gen, scratch) end
  local sample, append = d.sample, C.append
  local i, drawn, phase = 0, 0, "sample"
  local limit = rejection_limit(n)
  local ok, err = pcall(function()
    while i < n do
      phase = "sample"
      local doc = sample(gen, split)
      phase = "doc"
      drawn = drawn + 1
      if append(ds, doc, scratch) then
        i = i + 1
      elseif drawn - i > limit then
        phase = "holdout"
        error(string.format("%d documents drawn, %d kept", drawn, i), 0)
      end
    end
  end)
  if not ok then
    local where = string.format("task:dataset: task '%s', document %d of split %s", task:name(), i, split)
    if phase == "sample" then fail(where, "its sample function failed: " .. tostring(err)) end
    if phase == "holdout" then
      fail(where, string.format("the holdout (%g) keeps almost no document of this split (%s)", d.holdout, err))
    end
    fail(where, "the sample function's document is wrong: " .. tostring(err))
  end
  return C.done(ds)
end

-- The documents of a file task for split, in file order (all of them when n is nil).
local function file_dataset(task, d, n, split)
  local ds, _, scratch = C.open(task, n or #d.docs, 0, split)
  local i = 0
  for _, e in ipairs(d.docs) do
    if i == n then break end
    if (e.split == nil or e.split == split) and C.append(ds, e.doc, scratch) then i = i + 1 end
  end
  if n and i < n then
    fail("task:dataset", string.format("%s holds %d documents of split %s, asked for %d", d.path, i, split, n))
  end
  return C.done(ds)
end

--- task:dataset for a task made outside C (src/lua/task.c parses the arguments; n nil: the default).
function M.dataset(task, n, seed, split)
  local d = D.of(task)
  if d.kind == "jsonl" then return file_dataset(task, d, n, split) end
  n = n or (split == "train" and mech.task.TRAIN_DOCS or mech.task.EVAL_DOCS)
  return draw(task, d, n, seed, split)
end

--- task:sample([seed | generator], [split]): document 0 of task:dataset(1, {seed, split}), or the
--- next one of a generator (nothing: the task's own stream, so calls differ).
function M.sample(task, g, split)
  local d = D.of(task)
  split = split or "train"
  if d.kind == "jsonl" then return file_dataset(task, d, 1, split):doc(0) end
  if g == nil then
    d.gen = d.gen or mech.Generator(d.seed, 0x7a5c) -- a stream no dataset uses
    g = d.gen
  end
  local seed = math.type(g) == "integer" and g or d.seed
  return draw(task, d, 1, seed, split, math.type(g) ~= "integer" and g or nil):doc(0)
end

return M
