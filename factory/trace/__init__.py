"""The TRACE protocol: export of trajectories as SFT / RL records (``export``) and the reward functions
(``rewards``)."""
