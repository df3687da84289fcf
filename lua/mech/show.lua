--- The text of the binding's objects (their __tostring, set in src/lua/ through mlL_setlua):
--- a run_with_cache cache, a model:hook_names() list and a mech.optim optimizer; and any value
--- as error messages describe it.
local S = {}

local function dims(shape) return table.concat(shape, ", ") end

--- A value as error messages name what came ("got ..."), as the binding's mlL_describe: "a float32
--- tensor of shape [2,3]", "'text'", "3", "nil", "table".
function S.value(v)
  if mech.is_tensor(v) then return "a " .. v:dtype() .. " tensor of shape [" .. table.concat(v:shape(), ",") .. "]" end
  if type(v) == "string" then return "'" .. v:sub(1, 60) .. "'" end
  if type(v) == "number" then return tostring(v):sub(1, 60) end
  return type(v)
end

--- "mech.Cache with N activations:" and one line per cached name (sorted) with its shape.
function S.cache(cache)
  local keys = {}
  for k in pairs(cache) do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local out = { ("mech.Cache with %d activations%s"):format(#keys, #keys > 0 and ":" or "") }
  for _, k in ipairs(keys) do
    local t = rawget(cache, k)
    out[#out + 1] = ("\n  %-32s %s"):format(k, mech.is_tensor(t) and "(" .. dims(t:shape()) .. ")" or "")
  end
  return table.concat(out)
end

--- "N hook sites:" and one site a line with its shape (B and L for the batch and length).
function S.hook_names(list)
  local out = { ("%d hook sites:"):format(#list) }
  for _, e in ipairs(list) do
    local shape = {}
    for d, s in ipairs(type(e.shape) == "table" and e.shape or {}) do shape[d] = tostring(s) end
    out[#out + 1] = ("\n  %-32s (%s)"):format(type(e.name) == "string" and e.name or "?", dims(shape))
  end
  return table.concat(out)
end

--- "mech.optim.KIND(N tensors, M elements; group G: ...)" with each group's hyper-parameters.
function S.optimizer(opt)
  local ok, kind = pcall(function() return opt.kind end)
  if not ok then return "mech.optim (freed)" end
  local elems = 0
  for _, p in ipairs(opt:parameters()) do elems = elems + p:numel() end
  local out = { ("mech.optim.%s(%d tensors, %d elements"):format(kind, opt.n_params, elems) }
  for g, h in ipairs(opt:param_groups()) do
    if kind == "adamw" then
      out[#out + 1] = ("; group %d: %d tensors, lr %g, betas (%g, %g), eps %g, weight_decay %g"):format(g - 1,
        #h.params, h.lr, h.betas[1], h.betas[2], h.eps, h.weight_decay)
    else
      out[#out + 1] = ("; group %d: %d tensors, lr %g, momentum %g, dampening %g, nesterov %s, weight_decay %g"):format(
        g - 1, #h.params, h.lr, h.momentum, h.dampening, tostring(h.nesterov), h.weight_decay)
    end
  end
  return table.concat(out) .. ")"
end

return S
