"""PAC-Bayes compression bounds (thesis ch. 5): bounds, subspace training, quantisation, arithmetic coding and
the compression pipeline."""
