"""Rehearsing the served path on a CPU: a stand-in for vLLM and the `make rehearse` driver."""
