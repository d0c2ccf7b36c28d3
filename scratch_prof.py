import sys, time
sys.path.insert(0, '.')
from bench.agent_loop import bench_stage_driver
r = bench_stage_driver(200, 1, 0.1, 32, 0, latency_sigma=1.0, schedulers=("continuous",))
print(r)
