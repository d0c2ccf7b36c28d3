import sys, time, tempfile, asyncio, cProfile, pstats
from pathlib import Path
sys.path.insert(0, '.')
from bench.trajectories import start_mock_server
from factory.llm.openai_backend import OpenAILLM
from factory.llm.base import ChatRequest, Sampling
proc, url = start_mock_server(0.05)
try:
    llm = OpenAILLM([url], "mock-model", concurrency=32, registry_path=Path("/tmp/r.json"))
    reqs=[ChatRequest.of([{"role":"user","content":f"q {i}"}], Sampling()) for i in range(1500)]
    async def main():
        llm._slots = asyncio.Semaphore(32)
        await llm._generate(reqs[:100], "EMPTY")
        pr=cProfile.Profile(); pr.enable()
        c=time.process_time()
        await llm._generate(reqs[100:], "EMPTY")
        pr.disable()
        print("cpu ms/call", 1000*(time.process_time()-c)/1400)
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    asyncio.run(main())
finally:
    proc.terminate()
