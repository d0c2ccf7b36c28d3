"""Fixtures of the local-backend tests."""

import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny matrices: one thread is faster, and far faster when other processes share the cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
