"""How a send's outcome is answered: status code and body, the form stored for Idempotency-Key replays."""

from __future__ import annotations

from typing import Any, Literal

from sendonce.api.shapes import MessageModel, ResponseModel, to_json
from sendonce.messages.model import Status
from sendonce.messages.service import SendResult


class SendAccepted(ResponseModel):
    success: Literal[True]
    status: Status
    duplicateOnly: Literal[False]
    message: MessageModel


class DuplicateCaught(ResponseModel):
    success: Literal[True]
    duplicateOnly: Literal[True]
    duplicateMessage: str
    message: MessageModel | None


def describe_age(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60}m"


def send_answer(result: SendResult) -> dict[str, Any]:
    """{"statusCode", "body", "replayed"?}: JSON-serialisable, so it can be stored as it is."""
    if result.duplicate:
        age = describe_age(result.original_age_seconds or 0)
        if result.message is not None:
            sentence = (
                f"The same message was already sent to this recipient {age} ago; "
                "returning the existing message instead of sending again."
            )
        else:
            sentence = (
                f"An identical message to this recipient was accepted {age} ago; refusing to send it again."
            )
        caught = DuplicateCaught(
            success=True,
            duplicateOnly=True,
            duplicateMessage=sentence,
            message=MessageModel.of(result.message) if result.message else None,
        )
        return {"statusCode": 200, "body": to_json(caught, compact=True)}
    assert result.message is not None  # a created or replayed send always has its message
    accepted = SendAccepted(
        success=True,
        status=result.message.status,
        duplicateOnly=False,
        message=MessageModel.of(result.message),
    )
    answer: dict[str, Any] = {"statusCode": 201, "body": to_json(accepted, compact=True)}
    if result.replayed:
        answer["replayed"] = True
    return answer
