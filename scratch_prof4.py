import sys, time, asyncio
from pathlib import Path
sys.path.insert(0, '.')
from tests.mock_openai_server import MockOpenAIServer
from factory.llm.openai_backend import OpenAILLM
from factory.llm.base import ChatRequest, Sampling
with MockOpenAIServer(latency_s=0.05) as server:
    llm = OpenAILLM([server.base_url], "mock-model", concurrency=32, registry_path=Path("/tmp/r.json"))
    reqs=[ChatRequest.of([{"role":"user","content":f"q {i}"}], Sampling()) for i in range(300)]
    out=llm.generate(reqs)
    print(server.state.completions, llm.attempts, llm.retries, sum(r.ok for r in out))
    llm.close()
