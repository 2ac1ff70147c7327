"""What Powertools' Tracer would cost the API function's cold start (docs/performance.md, "Tracing").

`python -m bench.tracer_cost [rounds] [seed]`: not part of `make bench`, since tracing is off. As
`cold_start.cold_starts_by_runtime` measures, on python3.13: fresh interpreters (`-S`), the layer as
it ships, rounds of the scripts in a shuffled order, the first round not counted, medians of wall
and CPU time. The layer is copied under build/tracer_cost/ and `aws-xray-sdk` added to the copy
only. Lambda's `LAMBDA_TASK_ROOT` is set, without which the Tracer turns itself off. Prints the
medians, and each Tracer variant's median difference from the API function round by round.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from bench.cold_start import (
    BASELINE_SCRIPT,
    BUILD_DIR,
    COMPILE,
    ROOT,
    _shipped_environment,
    function_script,
    interpreter,
    median_difference,
    median_of,
    shipped_layer,
    shuffled_rounds,
)
from bench.local_stack import free_ports
from sendonce_local.environment import function_environment
from sendonce_local.template import load_template

RUNTIME = "python3.13"
XRAY_SDK = ["aws-xray-sdk==2.15.0", "wrapt"]
# Built where every function module builds what it keeps: inside frozen_imports, before the module.
TRACER = """
from sendonce.startup import frozen_imports
with frozen_imports():
    from aws_lambda_powertools import Tracer
    tracer = Tracer(service="sendonce"{modules})
    assert not tracer.disabled
"""


def main(rounds: int = 21, seed: int = 7) -> dict[str, dict[str, float]]:
    python = interpreter(RUNTIME)
    if python is None:
        raise SystemExit(f"no {RUNTIME} interpreter on this machine")
    layer = shipped_layer(RUNTIME, python)
    traced = BUILD_DIR.parent / "tracer_cost" / "python"
    stamp = traced.parent / "installed"
    if not stamp.exists():
        shutil.rmtree(traced, ignore_errors=True)
        shutil.copytree(layer, traced)
        install = ["-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "--target", str(traced)]
        subprocess.run([str(python), *install, *XRAY_SDK], check=True, timeout=900)
        subprocess.run([str(python), *COMPILE, str(traced)], check=True, timeout=900)
        stamp.write_text("\n".join(XRAY_SDK), encoding="utf-8")
    shutil.rmtree(traced / "sendonce", ignore_errors=True)
    shutil.copytree(layer / "sendonce", traced / "sendonce")

    template = load_template(ROOT / "template.yaml")
    environment = function_environment(template, free_ports())
    environment.update(
        {
            "LAMBDA_TASK_ROOT": str(ROOT),
            "AWS_LAMBDA_FUNCTION_NAME": "ApiFunction",
            "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
        }
    )
    env = _shipped_environment(environment, traced)
    api = function_script(template.functions["ApiFunction"])
    scripts = {
        "baseline": BASELINE_SCRIPT,
        "api": api,
        "api+tracer(patch_all)": TRACER.format(modules="") + api,
        "api+tracer(botocore,httplib)": TRACER.format(modules=', patch_modules=["botocore", "httplib"]')
        + api,
    }
    samples = shuffled_rounds(
        {name: (python, script, env) for name, script in scripts.items()}, rounds, ROOT, seed
    )
    base = {unit: median_of(samples["baseline"], unit) for unit in ("ms", "cpu_ms")}
    results: dict[str, dict[str, float]] = {}
    for name, taken in samples.items():
        figures = {}
        for unit in ("ms", "cpu_ms"):
            median = median_of(taken, unit)
            figures[unit] = round(median, 1)
            figures[f"{unit}_ratio"] = round(median / base[unit], 2)
            if name.startswith("api+"):
                extra = median_difference(taken, samples["api"], unit)
                figures[f"{unit}_more_than_api_by_round"] = round(extra, 1)
        results[name] = figures
    return results


if __name__ == "__main__":
    arguments = [int(argument) for argument in sys.argv[1:3]]
    print(json.dumps(main(*arguments), indent=1))
