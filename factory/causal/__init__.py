"""The causal check of the backtrace labels: correct trajectories re-asked under counterfactual conditions."""
