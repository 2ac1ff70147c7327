"""The OpenAPI document is complete enough for a schema-driven fuzzer.

Schemathesis reads `GET /openapi.json` from the running local stack and sends hundreds of
generated requests, valid and not, to every operation: no answer may be a server error, and every
answer must be a status code, content type, header set and body that the document declares.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    )
)


# As long as the run itself may take (below): each listing page queries every shard of its index
# (64 for messages, 128 for events), and moto answers each query in some milliseconds.
@pytest.mark.timeout(600)
def test_every_answer_to_generated_requests_is_one_the_document_declares(
    stack: LocalStack, tmp_path: Path
) -> None:
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{stack.api}/openapi.json",
            "--url",
            stack.api,
            "--header",
            f"Authorization: Bearer {stack.api_key}",
            "--checks",
            CHECKS,
            "--max-examples",
            "25",
            "--seed",
            "20261130",
            # A listing page reads every shard of its index from moto, one query at a time there:
            # seconds on a busy machine, never a network error.
            "--request-timeout",
            "60",
        ],
        cwd=tmp_path,  # its example database stays out of the repository
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
