-- nn.Embedding(num_embeddings, embedding_dim): rows of W (V, D) at int32 ids, as torch.nn.Embedding.
local nn = require "mech.nn.module"
local C = require "mech.nn.checks"

local Embedding = nn.Module:extend("Embedding")

function Embedding:init(num, dim)
  local fn = "mech.nn.Embedding"
  num, dim = C.size(fn, "argument 1 (num_embeddings)", num), C.size(fn, "argument 2 (embedding_dim)", dim)
  self.num_embeddings, self.embedding_dim = num, dim
  self.weight = self:param("weight", { num, dim }, { init = "embedding" })
end

function Embedding:forward(ids) return mech.embedding(self.weight, ids) end

return Embedding
