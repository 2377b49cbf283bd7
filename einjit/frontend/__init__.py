"""The einsum frontend: grammar -> parser -> EinsumTree (opt_einsum order, frontend.paths) ->
rewrite (layouts for column-major primitives) -> lower (TensorOperations) -> plan (execution);
numpy_rules holds numpy.einsum's rules for a call (options, casts, views, layouts).
The public entry points are einjit.einsum, einjit.contract_expression and einjit.EinsumTree."""
