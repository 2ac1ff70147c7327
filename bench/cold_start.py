"""Cold start: a fresh interpreter imports a function's module by file path and builds its clients.

Timed inside the child (interpreter start-up itself is the same for every function and the
baseline, and is left out), median over several runs, next to `import boto3` plus one client.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from sendonce_local.template import FunctionSpec

# What each function builds on its first invocation: its composition root, which every function's
# module exposes as `root`. A dispatcher builds its SQS client (redelivery) only when a record must
# be postponed.
BUILD_ROOT = "_module.root.get()"
BASELINE_SCRIPT = "import boto3; boto3.client('dynamodb')"

TIMER = """
import time, json
_t0 = time.perf_counter()
{body}
print(json.dumps({{"ms": (time.perf_counter() - _t0) * 1000}}))
"""

IMPORT_BY_PATH = """
import importlib.util
_spec = importlib.util.spec_from_file_location("cold_start_fn", {file!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
{builders}
"""


def function_script(spec: FunctionSpec) -> str:
    module_path = spec.handler.rpartition(".")[0]
    file = spec.code_dir / (module_path.replace(".", "/") + ".py")
    return IMPORT_BY_PATH.format(file=str(file), builders=BUILD_ROOT)


def _run_once(body: str, environment: dict[str, str], cwd: Path) -> float:
    completed = subprocess.run(
        [sys.executable, "-c", TIMER.format(body=body)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    ms: float = json.loads(completed.stdout.strip().splitlines()[-1])["ms"]
    return ms


def median_ms(body: str, environment: dict[str, str], cwd: Path, runs: int) -> float:
    _run_once(body, environment, cwd)  # writes any missing bytecode; not counted
    return round(statistics.median(_run_once(body, environment, cwd) for _ in range(runs)), 1)


def cold_starts(
    functions: dict[str, FunctionSpec], environment: dict[str, str], cwd: Path, runs: int
) -> dict[str, float]:
    """Median milliseconds: "baseline" and each function by logical id."""
    env = {**os.environ, **environment}
    results = {"baseline": median_ms(BASELINE_SCRIPT, env, cwd, runs)}
    for name, spec in functions.items():
        results[name] = median_ms(function_script(spec), env, cwd, runs)
    return results


def import_time_top(
    spec: FunctionSpec, environment: dict[str, str], cwd: Path, top: int = 12
) -> dict[str, object]:
    """`python -X importtime` on the function: the costliest top-level imports (cumulative)."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", function_script(spec)],
        env={**os.environ, **environment},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    parsed: list[dict[str, object]] = []
    for line in completed.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2  # the name column is indented per level
        parsed.append(
            {
                "module": name.strip(),
                "depth": depth,
                "self_ms": int(self_us) / 1000,
                "cumulative_ms": int(cumulative_us) / 1000,
            }
        )
    packages: dict[str, float] = {}
    for row in parsed:
        package = str(row["module"]).split(".")[0]
        packages[package] = packages.get(package, 0.0) + float(str(row["self_ms"]))
    by_package = sorted(packages.items(), key=lambda item: -item[1])[:top]
    heaviest = sorted(
        (row for row in parsed if 1 <= int(str(row["depth"])) <= 2),
        key=lambda row: -float(str(row["cumulative_ms"])),
    )[:top]
    return {
        "total_ms": round(max(float(str(row["cumulative_ms"])) for row in parsed), 1),
        "by_package_self_ms": {name: round(ms, 1) for name, ms in by_package},
        "heaviest_cumulative_ms": {
            str(row["module"]): round(float(str(row["cumulative_ms"])), 1) for row in heaviest
        },
    }
