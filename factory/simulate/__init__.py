"""Simulated trajectories with known contributive triplets, and the backtracing sensitivity report."""
