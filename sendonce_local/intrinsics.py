"""Resolves CloudFormation intrinsic functions to the values the local stack gives them.

Tables and secrets are named by their logical id, queues live in the emulator at a predictable
URL, a bucket is named by the stack and its logical id (in lower case, as S3 wants), and a
parameter takes the value the local stack gives it (as `sam deploy` would be told), else its
Default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sendonce_local.constants import ACCOUNT_ID, API_ID, REGION, STACK_NAME
from sendonce_local.template import (
    BUCKET_TYPE,
    FUNCTION_TYPE,
    HTTP_API_TYPE,
    QUEUE_TYPE,
    TABLE_TYPE,
    Template,
)

PSEUDO_PARAMETERS = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::StackName": STACK_NAME,
    "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{STACK_NAME}/local",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": None,
}
_SUB_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def queue_url(aws_endpoint: str, queue_name: str) -> str:
    """The URL moto gives a queue created through `aws_endpoint` (it echoes the request's host)."""
    return f"{aws_endpoint.rstrip('/')}/{ACCOUNT_ID}/{queue_name}"


def queue_arn(queue_name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{queue_name}"


def table_arn(table_name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{table_name}"


def default_bucket_name(logical_id: str) -> str:
    """The name of a bucket that gives no BucketName: the stack's name and its logical id, in lower
    case (`sendonce-local-campaignsbucket`), as CloudFormation names one without its random suffix;
    a bucket's name may hold no capital letter."""
    return f"{STACK_NAME}-{logical_id}".lower()


def bucket_arn(name: str) -> str:
    return f"arn:aws:s3:::{name}"


def function_arn(function_name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"


class Resolver:
    def __init__(
        self, template: Template, aws_endpoint: str, parameters: Mapping[str, str] | None = None
    ) -> None:
        self._template = template
        self._aws_endpoint = aws_endpoint
        self._parameters = dict(parameters or {})

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((name, argument),) = value.items()
            handler = _FUNCTIONS.get(name)
            if handler is not None:
                return handler(self, argument)
        return {key: self.resolve(item) for key, item in value.items()}

    def as_env_value(self, value: Any) -> str | None:
        resolved = self.resolve(value)
        if resolved is None:
            return None
        if isinstance(resolved, bool):
            return "true" if resolved else "false"
        if isinstance(resolved, list):
            return ",".join(str(item) for item in resolved)
        return str(resolved)

    # -------------------------------------------------------------- intrinsic functions
    def ref(self, name: str) -> Any:
        if name in PSEUDO_PARAMETERS:
            return PSEUDO_PARAMETERS[name]
        if name in self._parameters:
            return self._parameters[name]
        if name in self._template.parameters:
            return self._template.parameters[name].get("Default")
        kind = self._template.resource_type(name)
        if kind is None:
            raise KeyError(f"!Ref {name}: no such parameter or resource")
        if kind == QUEUE_TYPE:
            return queue_url(self._aws_endpoint, name)
        if kind == HTTP_API_TYPE:
            return API_ID
        if kind == BUCKET_TYPE:
            return self.bucket_name(name)
        return name  # tables, secrets, functions and everything else: named by their logical id

    def get_att(self, name: str, attribute: str) -> Any:
        kind = self._template.resource_type(name)
        if kind == QUEUE_TYPE:
            return {
                "Arn": queue_arn(name),
                "QueueName": name,
                "QueueUrl": queue_url(self._aws_endpoint, name),
            }[attribute]
        if kind == TABLE_TYPE:
            return {"Arn": table_arn(name), "StreamArn": f"{table_arn(name)}/stream/local"}[attribute]
        if kind == BUCKET_TYPE and attribute == "Arn":
            return bucket_arn(self.bucket_name(name))
        if kind == FUNCTION_TYPE and attribute == "Arn":
            return function_arn(name)
        if attribute == "Arn":
            return f"arn:aws:local:{REGION}:{ACCOUNT_ID}:{name}"
        raise KeyError(f"!GetAtt {name}.{attribute} is not emulated")

    def bucket_name(self, logical_id: str) -> str:
        """An AWS::S3::Bucket's name: its BucketName (resolved) if it gives one, else the default."""
        properties = self._template.resources[logical_id].get("Properties") or {}
        given = self.resolve(properties.get("BucketName"))
        return str(given) if given else default_bucket_name(logical_id)

    def sub(self, argument: Any) -> str:
        if isinstance(argument, list):
            text, variables = argument[0], {k: self.resolve(v) for k, v in (argument[1] or {}).items()}
        else:
            text, variables = argument, {}

        def replace(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("!"):
                return "${" + expression[1:] + "}"
            if expression in variables:
                return str(variables[expression])
            if "." in expression and expression.split(".", 1)[0] in self._template.resources:
                name, attribute = expression.split(".", 1)
                return str(self.get_att(name, attribute))
            return str(self.ref(expression))

        return _SUB_VARIABLE.sub(replace, str(text))

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self._template.conditions[name]))


def _get_att(resolver: Resolver, argument: Any) -> Any:
    name, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
    return resolver.get_att(str(name), str(resolver.resolve(attribute)))


def _if(resolver: Resolver, argument: list[Any]) -> Any:
    name, if_true, if_false = argument
    return resolver.resolve(if_true if resolver.condition(name) else if_false)


def _select(resolver: Resolver, argument: list[Any]) -> Any:
    index, items = argument
    return resolver.resolve(items)[int(resolver.resolve(index))]


def _join(resolver: Resolver, argument: list[Any]) -> str:
    delimiter, items = argument
    return str(delimiter).join(str(item) for item in resolver.resolve(items) if item is not None)


_FUNCTIONS: dict[str, Any] = {
    "Ref": lambda r, a: r.ref(a),
    "Fn::GetAtt": _get_att,
    "Fn::Sub": lambda r, a: r.sub(a),
    "Fn::Join": _join,
    "Fn::Select": _select,
    "Fn::If": _if,
    "Fn::Equals": lambda r, a: str(r.resolve(a[0])) == str(r.resolve(a[1])),
    "Fn::Not": lambda r, a: not r.resolve(a[0]),
    "Fn::And": lambda r, a: all(r.resolve(item) for item in a),
    "Fn::Or": lambda r, a: any(r.resolve(item) for item in a),
    "Condition": lambda r, a: r.condition(a),
}
