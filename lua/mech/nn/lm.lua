-- nn.LM{mixer = ..., d_model =, n_layers =, vocab =, ...}: the paper's language model around a
-- mixer, as mech.model builds it (embedding, positions, blocks, final norm, tied or untied head;
-- the C model, so training, hooks, patching and checkpoints serve it). `mixer` is a Module class
-- written in Lua, a built-in mixer's layer class (nn.Mamba) or a mixer's name; the other keys
-- are mech.model's and, for a Lua mixer, its own options.
return function(opts)
  if type(opts) ~= "table" then
    error("mech.nn.LM: argument 1 expected an options table {mixer =, d_model =, ...}, got " .. type(opts), 2)
  end
  local ok, model = pcall(mech.model, opts)
  if not ok then error("mech.nn.LM: " .. tostring(model):gsub("^mech%.model: ", ""), 2) end
  return model
end
