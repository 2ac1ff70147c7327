"""Reads what the local stack needs out of the SAM template: functions, tables, queues, secrets,
buckets, events."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfn_tools import load_yaml

from sendonce_local.event_filters import parse_filters

FUNCTION_TYPE = "AWS::Serverless::Function"
TABLE_TYPE = "AWS::DynamoDB::Table"
QUEUE_TYPE = "AWS::SQS::Queue"
SECRET_TYPE = "AWS::SecretsManager::Secret"  # noqa: S105 - a resource type
HTTP_API_TYPE = "AWS::Serverless::HttpApi"
BUCKET_TYPE = "AWS::S3::Bucket"
DEFAULT_TIMEOUT_SECONDS = 3
DEFAULT_MEMORY_MB = 128


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_dir: Path
    handler: str
    timeout_seconds: int
    memory_mb: int
    environment: dict[str, Any]  # unresolved: values may still be intrinsic functions

    @property
    def handler_file(self) -> Path:
        """The file of the handler's module: `functions.api.app.handler` is `functions/api/app.py`."""
        module_path = self.handler.rpartition(".")[0]
        return self.code_dir / (module_path.replace(".", "/") + ".py")


@dataclass(frozen=True)
class ResourceSpec:
    logical_id: str
    properties: dict[str, Any]


@dataclass(frozen=True)
class HttpRoute:
    function_id: str
    event_name: str
    method: str | None  # None, with path None: the `$default` route
    path: str | None

    @property
    def route_key(self) -> str:
        if self.method is None or self.path is None:
            return "$default"
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class SqsMapping:
    function_id: str
    event_name: str
    queue_id: str
    batch_size: int
    report_batch_item_failures: bool
    enabled: bool = True
    # ScalingConfig.MaximumConcurrency, unresolved (it may be a !Ref to a parameter); None: not set.
    maximum_concurrency: Any = None


@dataclass(frozen=True)
class StreamMapping:
    """A `Type: DynamoDB` event: Lambda's event source mapping on a table's stream."""

    function_id: str
    event_name: str
    table_id: str
    batch_size: int
    starting_position: str  # TRIM_HORIZON or LATEST
    report_batch_item_failures: bool
    bisect: bool  # BisectBatchOnFunctionError
    enabled: bool = True
    batching_window_seconds: float = 0.0  # MaximumBatchingWindowInSeconds
    filters: tuple[dict[str, Any], ...] = ()  # FilterCriteria's patterns (sendonce_local.event_filters)


@dataclass(frozen=True)
class ScheduleSpec:
    function_id: str
    event_name: str
    expression: str
    input: str | None
    enabled: bool = True
    kind: str = "Schedule"  # or "ScheduleV2" (EventBridge Scheduler)


@dataclass
class Template:
    root: Path
    parameters: dict[str, Any]
    conditions: dict[str, Any]
    resources: dict[str, Any]
    globals: dict[str, Any]
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    tables: list[ResourceSpec] = field(default_factory=list)
    queues: list[ResourceSpec] = field(default_factory=list)
    secrets: list[ResourceSpec] = field(default_factory=list)
    buckets: list[ResourceSpec] = field(default_factory=list)
    routes: list[HttpRoute] = field(default_factory=list)
    sqs_mappings: list[SqsMapping] = field(default_factory=list)
    stream_mappings: list[StreamMapping] = field(default_factory=list)
    schedules: list[ScheduleSpec] = field(default_factory=list)

    def resource_type(self, logical_id: str) -> str | None:
        resource = self.resources.get(logical_id)
        return resource.get("Type") if isinstance(resource, dict) else None


def load_template(path: Path) -> Template:
    return parse_template(load_yaml(path.read_text(encoding="utf-8")), path.resolve().parent)


def parse_template(document: dict[str, Any], root: Path) -> Template:
    template = Template(
        root=root,
        parameters=dict(document.get("Parameters") or {}),
        conditions=dict(document.get("Conditions") or {}),
        resources=dict(document.get("Resources") or {}),
        globals=dict(document.get("Globals") or {}),
    )
    function_globals = template.globals.get("Function") or {}
    for logical_id, resource in template.resources.items():
        kind = resource.get("Type")
        properties = resource.get("Properties") or {}
        if kind == TABLE_TYPE:
            template.tables.append(ResourceSpec(logical_id, properties))
        elif kind == QUEUE_TYPE:
            template.queues.append(ResourceSpec(logical_id, properties))
        elif kind == SECRET_TYPE:
            template.secrets.append(ResourceSpec(logical_id, properties))
        elif kind == BUCKET_TYPE:
            template.buckets.append(ResourceSpec(logical_id, properties))
        elif kind == FUNCTION_TYPE:
            template.functions[logical_id] = _function(logical_id, properties, function_globals, root)
            _events(template, logical_id, properties.get("Events") or {})
    return template


def _function(
    logical_id: str, properties: dict[str, Any], defaults: dict[str, Any], root: Path
) -> FunctionSpec:
    def setting(name: str, default: Any) -> Any:
        return properties.get(name, defaults.get(name, default))

    environment = dict((defaults.get("Environment") or {}).get("Variables") or {})
    environment.update((properties.get("Environment") or {}).get("Variables") or {})
    code_uri = setting("CodeUri", ".")
    if not isinstance(code_uri, str):
        raise ValueError(f"{logical_id}: only a local CodeUri path is supported, not {code_uri!r}")
    return FunctionSpec(
        logical_id=logical_id,
        code_dir=(root / code_uri).resolve(),
        handler=str(setting("Handler", "app.handler")),
        timeout_seconds=int(setting("Timeout", DEFAULT_TIMEOUT_SECONDS)),
        memory_mb=int(setting("MemorySize", DEFAULT_MEMORY_MB)),
        environment=environment,
    )


def _events(template: Template, function_id: str, events: dict[str, Any]) -> None:
    for name, event in events.items():
        kind = event.get("Type")
        properties = event.get("Properties") or {}
        if kind == "HttpApi":
            template.routes.append(_http_route(template, function_id, name, properties))
        elif kind == "SQS":
            template.sqs_mappings.append(
                SqsMapping(
                    function_id=function_id,
                    event_name=name,
                    queue_id=_referenced_id(properties.get("Queue")),
                    batch_size=min(int(properties.get("BatchSize", 10)), 10),
                    report_batch_item_failures="ReportBatchItemFailures"
                    in (properties.get("FunctionResponseTypes") or []),
                    enabled=bool(properties.get("Enabled", True)),
                    maximum_concurrency=(properties.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                )
            )
        elif kind == "DynamoDB":
            template.stream_mappings.append(_stream_mapping(function_id, name, properties))
        elif kind in ("Schedule", "ScheduleV2"):
            enabled = properties.get("Enabled", True) and properties.get("State", "ENABLED") != "DISABLED"
            expression = properties.get("Schedule") or properties.get("ScheduleExpression")
            template.schedules.append(
                ScheduleSpec(
                    function_id=function_id,
                    event_name=name,
                    expression=str(expression),
                    input=properties.get("Input"),
                    enabled=bool(enabled),
                    kind=str(kind),
                )
            )


def _stream_mapping(function_id: str, name: str, properties: dict[str, Any]) -> StreamMapping:
    position = str(properties.get("StartingPosition", ""))
    if position not in ("TRIM_HORIZON", "LATEST"):
        raise ValueError(
            f"{function_id}.{name}: StartingPosition must be TRIM_HORIZON or LATEST, not {position!r}"
        )
    return StreamMapping(
        function_id=function_id,
        event_name=name,
        table_id=_stream_table_id(properties.get("Stream")),
        batch_size=max(1, min(int(properties.get("BatchSize", 100)), 10_000)),  # Lambda's default and limit
        starting_position=position,
        report_batch_item_failures="ReportBatchItemFailures"
        in (properties.get("FunctionResponseTypes") or []),
        bisect=bool(properties.get("BisectBatchOnFunctionError", False)),
        enabled=bool(properties.get("Enabled", True)),
        batching_window_seconds=float(properties.get("MaximumBatchingWindowInSeconds", 0)),
        filters=parse_filters(properties.get("FilterCriteria"), f"{function_id}.{name}"),
    )


def _stream_table_id(value: Any) -> str:
    """The table whose stream `!GetAtt T.StreamArn` (or a stream ARN, `...:table/T/stream/...`) names."""
    if isinstance(value, str):
        match = re.search(r":table/([^/]+)/stream/", value)
        if match:
            return match.group(1)
    return _referenced_id(value)


def _referenced_id(value: Any) -> str:
    """The logical id named by `!Ref X`, `!GetAtt X.Arn` or a plain string."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else target.split(".")[0])
    if isinstance(value, str):
        return value.rsplit(":", 1)[-1]
    raise ValueError(f"cannot tell which resource {value!r} names")


def _http_route(template: Template, function_id: str, name: str, properties: dict[str, Any]) -> HttpRoute:
    api_id = properties.get("ApiId")
    if api_id is None:
        api_properties = template.globals.get("HttpApi") or {}
    else:
        api_properties = template.resources[_referenced_id(api_id)].get("Properties") or {}
    # The API function checks the API key itself: an authorizer would run before it, and it is not
    # emulated, so a template that gives a route one is refused rather than served without it.
    api_auth = api_properties.get("Auth") or {}
    authorizer = (properties.get("Auth") or {}).get("Authorizer", api_auth.get("DefaultAuthorizer"))
    if authorizer and authorizer != "NONE":
        raise ValueError(f"{function_id}.{name}: HTTP API authorizers are not emulated ({authorizer})")
    method = properties.get("Method")
    path = properties.get("Path")
    if method is not None and path is not None:
        method = str(method).upper()
        if method == "X-AMAZON-APIGATEWAY-ANY-METHOD":
            method = "ANY"
    return HttpRoute(function_id, name, method, path)


def default_template_path() -> Path:
    here = Path.cwd() / "template.yaml"
    if here.is_file():
        return here
    return Path(__file__).resolve().parent.parent / "template.yaml"


def references(value: Any) -> Iterator[str]:
    """Every name a value refers to: !Ref, !GetAtt, and the ${...} of !Sub."""
    if isinstance(value, list):
        for item in value:
            yield from references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref":
                yield str(item)
            elif key == "Fn::GetAtt":
                yield str(item[0] if isinstance(item, list) else item.split(".")[0])
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                yield from (name.split(".")[0] for name in re.findall(r"\$\{([^!}][^}]*)\}", str(text)))
                if isinstance(item, list):
                    yield from references(item[1:])
            else:
                yield from references(item)
