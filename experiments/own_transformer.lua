-- A plain Transformer built by hand from mech.nn layers (embedding, learned positions, two
-- attention blocks, final LayerNorm, tied head), trained on a small associative-recall task with
-- mech.optim.adamw in a loop written here. Runs in well under a minute on one thread. In these
-- few hundred steps the model learns to answer with one of the four values of its context (test
-- accuracy near 1/4, against 1/8 for a guess among the 8 values); recalling the queried key's
-- value takes thousands of steps (experiments/ar_attention.lua trains the paper's setting).
--   mechlab experiments/own_transformer.lua [steps=600] [d_model=32] [lr=3e-3] [seed=1]
local nn = mech.nn

local opts = { steps = 600, d_model = 32, lr = 3e-3, seed = 1 }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then error("usage: own_transformer.lua [steps=..] [d_model=..] [lr=..] [seed=..]; got " .. a) end
  opts[k] = tonumber(v) or error("own_transformer.lua: " .. k .. " expected a number")
end
mech.threads(1)
mech.manual_seed(opts.seed)

-- AR: four key-value pairs (8 keys, 8 values), then a key; the model must answer its value (one
-- supervised row per document)
local task = mech.task.ar { num_kv = 16, min_length = 8, max_length = 8 }
local V, B = task:vocab_size(), 32
local train_ds = task:dataset(B * 200, { seed = opts.seed, split = "train" })
local test_ds = task:dataset(256, { seed = opts.seed + 1, split = "test" })
local D = math.tointeger(opts.d_model)

local Transformer = nn.Module:extend("OwnTransformer")
function Transformer:init(n_layers)
  self.embed = nn.Embedding(V, D)
  self.pos_embed = nn.Embedding(64, D)
  self.blocks = nn.ModuleList()
  for _ = 1, n_layers do self.blocks:append(nn.Block { d_model = D, mixer = nn.Attention { d_model = D } }) end
  self.ln_final = nn.LayerNorm(D)
end
function Transformer:forward(tokens)
  local L = tokens:shape()[2]
  local r = self.embed(tokens) + self.pos_embed.weight:narrow(0, 0, L)
  for l = 0, #self.blocks - 1 do r = self.blocks[l](r) end
  return mech.linear(self.ln_final(r), self.embed.weight) -- the tied head
end

-- The supervised rows of a batch: flat indices b·L + t and their targets (N).
local function supervised(targets)
  local rows, labels = {}, {}
  local L = targets:shape()[2]
  for b, row in ipairs(targets:tolist()) do
    for t, v in ipairs(row) do
      if v ~= -100 then rows[#rows + 1], labels[#labels + 1] = (b - 1) * L + t - 1, v end
    end
  end
  return mech.tensor(rows, { dtype = "int32" }), mech.tensor(labels, { dtype = "int32" })
end

-- loss and accuracy at the supervised rows
local function evaluate(model, tokens, targets)
  local rows, labels = supervised(targets)
  local Bn, L = tokens:shape()[1], tokens:shape()[2]
  local logits = model(tokens):reshape(Bn * L, V):index_select(0, rows)
  local loss = nn.cross_entropy(logits, labels)
  local acc = mech.eq(logits:argmax(1), labels):float():mean():item()
  return loss, acc
end

local model = Transformer(2)
-- small embeddings, as the built-in models start (N(0, 0.02)): a tied head over N(0, 1) rows
-- would start with huge logits
mech.no_grad(function()
  for _, w in ipairs { model.embed.weight, model.pos_embed.weight } do w:copy_(mech.randn(w:shape()) * 0.02) end
end)
print(model)
local opt = mech.optim.adamw(model, { lr = opts.lr, weight_decay = 0.01 })
local sched = mech.lr_schedule { kind = "cosine", lr = opts.lr, total = opts.steps, warmup = 0.1 }
local t0 = mech.sys.time()
for step = 0, opts.steps - 1 do
  local tokens, targets = train_ds:batch((step * B) % train_ds:size(), B)
  opt:zero_grad()
  local loss, acc = evaluate(model, tokens, targets)
  loss:backward()
  opt:set_lr(sched(step))
  opt:step()
  if step % 50 == 0 or step == opts.steps - 1 then
    print(string.format("step %4d  loss %.4f  batch accuracy %.3f", step, loss:item(), acc))
  end
end
local tokens, targets = test_ds:batch(0, test_ds:size())
local loss, acc = mech.no_grad(function() return evaluate(model, tokens, targets) end)
print(string.format("test: loss %.4f  accuracy %.3f (a guess among the values: %.3f) after %d steps in %.1f s",
  loss:item(), acc, 1 / 8, opts.steps, mech.sys.time() - t0))
