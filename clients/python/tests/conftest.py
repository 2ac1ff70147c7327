from __future__ import annotations

import pytest
from client_support import Api, FakeTime


@pytest.fixture
def api() -> Api:
    return Api(FakeTime())
