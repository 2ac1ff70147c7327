"""API Gateway HTTP API route selection: the most specific matching route wins, then `$default`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sendonce_local.template import HttpRoute

_PARAMETER = re.compile(r"\{([^}/]+?)(\+?)\}")


@dataclass(frozen=True)
class RouteMatch:
    route: HttpRoute
    path_parameters: dict[str, str]


def _pattern(path: str) -> re.Pattern[str]:
    regex, position = "", 0
    for match in _PARAMETER.finditer(path):
        regex += re.escape(path[position : match.start()])
        name, greedy = match.group(1), match.group(2)
        regex += f"(?P<{_group(name)}>.+)" if greedy else f"(?P<{_group(name)}>[^/]+)"
        position = match.end()
    regex += re.escape(path[position:])
    return re.compile(f"^{regex}$")


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)


def _specificity(route: HttpRoute) -> tuple[int, int, int, int]:
    """Sort key, lower first: exact paths, then fewer greedy and fewer plain parameters, longer paths."""
    path = route.path or ""
    greedy = path.count("+}")
    parameters = len(_PARAMETER.findall(path))
    return (greedy, parameters, -len(path), route.method == "ANY")


class Router:
    def __init__(self, routes: list[HttpRoute]) -> None:
        self._default = next((route for route in routes if route.route_key == "$default"), None)
        explicit = sorted((route for route in routes if route.route_key != "$default"), key=_specificity)
        self._routes = [(route, _pattern(route.path or "")) for route in explicit]

    def match(self, method: str, path: str) -> RouteMatch | None:
        for route, pattern in self._routes:
            if route.method not in (method.upper(), "ANY"):
                continue
            found = pattern.match(path)
            if found:
                names = [name for name, _ in _PARAMETER.findall(route.path or "")]
                return RouteMatch(route, {name: found.group(_group(name)) for name in names})
        if self._default is not None:
            return RouteMatch(self._default, {})
        return None
