"""TraceFactory: a reproducible data factory for self-training multi-hop RAG agents."""

__version__ = "0.1.0"
