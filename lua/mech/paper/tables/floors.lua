--- The floor of each ATR setting: the accuracy a model reaches without retrieval, computed from the
--- task's own generator (the paper's grammar and documents, numpy stream at seed 42). A model that
--- never reads the key (the queried child in the context) can still read the query token and the
--- rest of the document; the best of these key-blind predictors, scored on the very documents a
--- run was evaluated on, is the floor:
---   root head   the yield's last terminal, the head of the start rule (right-headed grammar);
---   query       the query token itself (a sibling query can be its own answer);
---   by context  the answer most often seen in training documents with the same query token and
---               root head, among the document's own tokens (the root head where none was seen).
--- On (5, 20) the root head alone gives 151 of the first 320 test documents, 0.472: exactly the
--- accuracy of the 1-layer Based and BaseConv runs, whose filter denominator at the key is 0.
--- Part of mech.paper.tables.
local Fl = {}

-- training documents the "by context" predictor counts answers over: the first 20,000 of the
-- paper's 100,032 (about 2 s for every setting; with 5,000, the sibling floor on the first 320 test
-- documents is 0.722 instead of 0.756 and the split's dev floor 0.619 instead of 0.628, the
-- others unchanged: a floor is a lower bound on what a key-blind model can reach)
Fl.train_docs = 20000

-- the settings the page states a floor for: preset, split, title
Fl.settings = {
  { preset = "pcfg_5_20", split = "test", title = "(5, 20)" },
  { preset = "pcfg_easy_8192", split = "test", title = "(5, 8192)" },
  { preset = "pcfg_10_20", split = "test", title = "(10, 20)" },
  { preset = "pcfg_tts", split = "dev", title = "split, dev" },
  { preset = "pcfg_tts", split = "test", title = "split, test" },
  { preset = "sibling", split = "test", title = "sibling" },
}

local tasks, counts, memo = {}, {}, {}

local function task_of(preset)
  tasks[preset] = tasks[preset] or mech.task.preset(preset, 42, { rng = "numpy" })
  return tasks[preset]
end

-- what a key-blind model sees of a document: the query token, the root head, the answer, and,
-- given present, the tokens of the yield (marked with this document's stamp: one table for every
-- document; the training counts need none of them)
local function view(doc, present, stamp)
  local p, tok = doc.positions, doc.tokens
  if present then for i = 2, p.divider do present[tok[i]] = stamp end end
  return tok[p.query_item + 1], tok[p.divider], tok[p.target_item + 1]
end

local function context_key(q, root) return q * 65536 + root end -- token ids are below 65,536

-- answer counts per (query token, root head) over the training documents
local function context_counts(preset)
  if counts[preset] then return counts[preset] end
  local c, ds = {}, task_of(preset):dataset(Fl.train_docs, { split = "train" })
  for i = 0, Fl.train_docs - 1 do
    local q, root, answer = view(ds:doc(i))
    local key = context_key(q, root)
    local row = c[key]
    if not row then row = {}; c[key] = row end
    row[answer] = (row[answer] or 0) + 1
  end
  counts[preset] = c
  return c
end

-- the most frequent answer of a context among the present tokens (ties: the smaller id)
local function by_context(c, q, root, present, stamp)
  local best, most = root, 0
  for answer, n in pairs(c[context_key(q, root)] or {}) do
    if present[answer] == stamp and (n > most or (n == most and answer < best)) then best, most = answer, n end
  end
  return best
end

--- The floor of preset on the first n documents of split: {value, hits, n, rule, by_rule}.
function Fl.floor(preset, split, n)
  local key = preset .. "|" .. split .. "|" .. n
  if memo[key] then return memo[key] end
  local c = context_counts(preset)
  local ds = task_of(preset):dataset(n, { split = split })
  local hits, present = { ["root head"] = 0, query = 0, ["by context"] = 0 }, {}
  for i = 0, n - 1 do
    local q, root, answer = view(ds:doc(i), present, i)
    if root == answer then hits["root head"] = hits["root head"] + 1 end
    if q == answer then hits.query = hits.query + 1 end
    if by_context(c, q, root, present, i) == answer then hits["by context"] = hits["by context"] + 1 end
  end
  local f = { n = n, hits = -1, by_rule = hits }
  for _, rule in ipairs { "root head", "query", "by context" } do
    if hits[rule] > f.hits then f.hits, f.rule = hits[rule], rule end
  end
  f.value = f.hits / n
  memo[key] = f
  return f
end

--- The preset of a run's task id ("pcfg_5_20-t42-numpy" -> "pcfg_5_20"); nil for AR.
function Fl.preset(task)
  local p = task and task:match("^(.-)%-t%d+")
  return p
end

--- The floor of one run's evaluation (split "test" or "dev"), nil for a task without one (AR).
function Fl.of_run(e, split)
  local preset = Fl.preset(e.task)
  if not preset then return nil end
  return Fl.floor(preset, split or "test", (split == "dev" and e.dev or e).n)
end

return Fl
