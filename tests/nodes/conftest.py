"""Provider-node tests run on asyncio only (the node runs asyncio/uvloop)."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
