-- Zoology's multi-query associative recall (docs/tasks.md, "MQAR"): three of the paper's mixers
-- trained on one MQAR setting; prints the test accuracy per query (every query is a readout) and
-- the layer-1 block-input Attrib of the interchange evaluation (spec §6), per query.
--   mechlab experiments/mqar.lua [task=mqar_64_4] [archs=attention,based,mamba] [steps=3000]
--                                [d_model=64] [lr=1e-3] [out=runs/mqar] [smoke=true]
-- smoke=true: a 64-token vocabulary, 32-token documents, d_model 16 and 20 steps (the test's run).
local train = require "mech.train"
local ic = require "mech.interchange"

local opts = { task = "mqar_64_4", archs = "attention,based,mamba", steps = "3000", d_model = "64", lr = "1e-3",
  out = "", smoke = "false" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then
    error("usage: mqar.lua [task=mqar_64_4] [archs=attention,based,mamba] [steps=3000] [d_model=64] [lr=1e-3] "
      .. "[out=DIR] [smoke=true]; got '" .. a .. "'", 0)
  end
  opts[k] = v
end
local smoke = opts.smoke == "true"
local task = smoke and mech.task.mqar { vocab_size = 64, input_seq_len = 32, num_kv_pairs = 4, seed = 42 }
  or mech.task.preset(opts.task, 42)
local steps = smoke and 20 or math.tointeger(tonumber(opts.steps))
local d_model = smoke and 16 or math.tointeger(tonumber(opts.d_model))
local c = task:config()
print(string.format("MQAR: V = %d, L = %d, %d pairs (power_a %g), %d steps, d_model %d", c.vocab_size,
  c.input_seq_len, c.num_kv_pairs, c.power_a, steps, d_model))

local results = {}
for arch in opts.archs:gmatch("[^,]+") do
  local run = train.run {
    model = { arch = arch, d_model = d_model, n_layers = 2, pos_emb = arch == "attention" },
    task = task, steps = steps, batch_size = smoke and 16 or 64, train_docs = smoke and 320 or 64 * steps,
    eval_docs = smoke and 32 or 1000, eval_every = math.max(steps // 4, 1), lr = tonumber(opts.lr),
    seed = 1, quiet = true, threads = 1, out = opts.out ~= "" and (opts.out .. "/" .. arch) or nil,
  }
  -- the layer-1 block-input Attrib, the key corrupted: every query is an example, with its own
  -- key and value in the context (target_item_orig) and its own position (query_item)
  local test = task:dataset(smoke and 32 or 320, { seed = 1, split = "test" })
  local res = ic.evaluate(run.model, test, { layers = { 1 }, components = { "block_input" },
    label_types = { "query_item_orig" } })
  local attrib = {}
  for _, p in ipairs { "target_item_orig", "query_item", "query_item_orig" } do
    attrib[p] = ic.attrib(res, "1.KEY.query_item_orig." .. p .. ".block_input")
  end
  results[#results + 1] = { arch = arch, acc = run.final.accuracy, n = run.final.n, wall = run.wall, attrib = attrib }
  print(string.format("  %-10s test accuracy %.4f over %d queries (%.1f s); layer-1 Attrib @ value %.3f, query %.3f, "
    .. "key %.3f", arch, run.final.accuracy, run.final.n, run.wall, attrib.target_item_orig, attrib.query_item,
    attrib.query_item_orig))
end
return results
