"""How the factory's maps over questions and trajectories run: the machinery beside the method.

``factory.agent`` is the KnowTrace method (prompts, formats, the program of a trajectory); this
package runs it: seeded samples (``sampling``), generation in checkpointed shards or continuously
with a journal (``generate``, ``shards``, ``scheduler``), evaluation (``evaluate``), summaries read
back from the files (``summary``), and where a shard runs (``engine``: in this process, or as Ray
tasks on a cluster).
"""
