"""The labeller calibrated on real LLM noise: graphs a real LLM extracted from real passages, with their
gold supporting paragraphs (``graphs``), what S_q and the controls keep of them (``methods``), their
paragraph-level scores with bootstrap CIs (``scores``) and the result with its verdicts (``calibrate``);
``hipporag`` builds such a file from HippoRAG's published OpenIE output."""
