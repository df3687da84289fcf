-- A hand-written training loop: forward, loss, backward, AdamW (torch.optim style), a warm-up.
local task = mech.task.ar { num_kv = 8, min_length = 4, max_length = 8 }
local model = mech.model { arch = "based", d_model = 16, n_layers = 2, vocab = task:vocab_size(), seed = 2 }
local ok, err = pcall(mech.adamw, model, { lr = 3e-3 })
print(err)
local opt = mech.optim.adamw(model, { lr = 3e-3, weight_decay = 0.1 })
local ds = task:dataset(256, { seed = 3, split = "train" })
local first, last
for step = 0, 59 do
  local tokens, targets = ds:batch((step * 16) % 256, 16)
  local loss = model:loss(tokens, targets)
  model:zero_grad()
  loss:backward()
  opt:set_lr(3e-3 * math.min(1, (step + 1) / 10))
  opt:step()
  first = first or loss:item()
  last = loss:item()
end
print(string.format("loss %.3f -> %.3f", first, last), last < first)
