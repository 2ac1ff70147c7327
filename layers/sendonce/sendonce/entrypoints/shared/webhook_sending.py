"""How status webhooks are sent, for the two functions that send or register them: the check of a
target at registration (the API) and the sender that checks it again before every attempt (the
delivery function).

The sender checks a target and posts to the address it checked (`webhooks.outbound`); the local
stack's settings let it reach loopback receivers. `webhooks.outbound` is imported on first use: the
API's cold start never needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sendonce.status_webhooks.delivery import EndpointAnswer, Sender


def sender(*, allow_private: bool) -> Sender:
    """Checks the target before every attempt, then posts to the very address it checked."""
    from sendonce.status_webhooks import outbound  # noqa: PLC0415

    def send(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> EndpointAnswer:
        try:
            target = outbound.check_url(url, allow_private=allow_private)
        except outbound.UnsafeTarget as refused:
            return EndpointAnswer(None, f"refused: {refused.reason}")
        answer = outbound.post(target, body, headers, timeout=timeout)
        return EndpointAnswer(answer.status, answer.error, answer.timed_out)

    return send


def target_checker(*, allow_private: bool) -> Callable[[str], object]:
    """The check at registration: a host that does not resolve yet is taken (it is checked again,
    resolved, before every attempt); one that resolves to an address it may not reach is refused."""
    from sendonce.status_webhooks import outbound  # noqa: PLC0415

    def check(url: str) -> object:
        try:
            return outbound.check_url(url, allow_private=allow_private)
        except outbound.Unresolvable:
            return None

    return check
