-- A 2-hop recall of one's own: key -> bridge, bridge -> value; the question is a key, the answer
-- its bridge's value. The bridge gets a position name of its own, and the patching map patches it.
local V = { "<pad>", "<bos>", "=" }
for _, kind in ipairs { "k", "b", "v" } do for i = 0, 5 do V[#V + 1] = kind .. i end end
local function id(kind, i) return 3 + ({ k = 0, b = 6, v = 12 })[kind] + i end

local task = mech.task.new {
  name = "two_hop_mine", vocab = V, corrupt = { "k0", "k5" },
  positions = { "bos", "query_item_orig", "bridge", "divider", "query_item", "target_item" },
  sample = function(gen)
    local k, b, v = gen:below(6), gen:below(6), gen:below(6)
    local k2 = (k + 1 + gen:below(5)) % 6 -- a distractor pair
    local tokens = { 1, id("k", k), id("b", b), id("k", k2), id("b", (b + 1) % 6), id("b", b), id("v", v), 2, id("k", k),
      id("v", v) }
    return { tokens = tokens, targets = { 9 },
      positions = { bos = 0, query_item_orig = 1, bridge = 2, divider = 7, query_item = 8, target_item = 9 } }
  end,
}
print("positions", table.concat(task:positions(), ","))
local ds = task:dataset(32, { seed = 1, split = "test" })
print(ds:show(0))
local train = require "mech.train"
local run = train.run { model = { arch = "attention", d_model = 32, n_layers = 2 }, task = task, train_docs = 256,
  eval_docs = 32, batch_size = 16, steps = 60, eval_every = 60, lr = 3e-3, quiet = true }
local ic = require "mech.interchange"
local clean, corrupted = ic.corrupt(ds, 0, 16)
local map = mech.interp.patching_map(run.model, clean, corrupted, { dataset = ds, first = 0, layers = { 0, 1 },
  components = { "block_input" }, positions = { "query_item_orig", "bridge", "query_item" } })
print("columns", table.concat(map.positions, ","))
print("rows", #map.sites)
