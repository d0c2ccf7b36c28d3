import sys, time, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from bench.trajectories import start_mock_server
from factory.llm.openai_backend import OpenAILLM
from factory.llm.cache import CachedLLM, ResponseCache
from factory.llm.base import ChatRequest, Sampling
from concurrent.futures import wait
proc, url = start_mock_server(0.05)
try:
    for cached in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            llm = OpenAILLM([url], "mock-model", concurrency=32, registry_path=Path(tmp)/"r.json")
            if cached: llm = CachedLLM(llm, ResponseCache(Path(tmp)/"c.sqlite"))
            reqs=[ChatRequest.of([{"role":"user","content":f"q {i} {cached}"}], Sampling()) for i in range(2000)]
            llm.generate(reqs[:32])
            for mode in ("generate","submit"):
                rs = reqs[32:1000] if mode=="generate" else reqs[1000:]
                c,t=time.process_time(),time.perf_counter()
                if mode=="generate": llm.generate(rs)
                else:
                    fs=[llm.submit(r) for r in rs]; wait(fs)
                print("cached" if cached else "plain", mode, f"cpu ms/call {1000*(time.process_time()-c)/len(rs):.2f}", f"calls/s {len(rs)/(time.perf_counter()-t):.0f}")
            llm.close()
finally:
    proc.terminate()
