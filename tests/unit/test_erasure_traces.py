"""Erasing DynamoDB items in place: recipient and content fields erased whole at any depth, any other
text only where it holds the address, JSON inside a text erased inside it (a stored answer's body,
whole or compressed, stays JSON a replay can answer), keys never touched, an erased item unchanged."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from sendonce.adapters.dynamodb_erasure_traces import erased_attributes, idempotency_record_id
from sendonce.api.idempotency import KEY_PREFIX, idempotency_config
from sendonce.erasures.model import ERASED, Redaction
from sendonce.messages.recipients import normalise_phone

PHONE = "+15550100000"
REDACTION = Redaction.of(normalise_phone(PHONE))
MESSAGE = {"id": "msg_1", "to": PHONE, "body": "secret", "metadata": {"n": f"tel {PHONE}", "k": "v"}}


def _answer(body: dict[str, Any], *, packed: bool = False) -> str:
    text = json.dumps(body)
    if packed:
        zipped = base64.b64encode(zlib.compress(text.encode(), 6)).decode()
        return json.dumps({"statusCode": 201, "headers": {}, "bodyZ": zipped})
    return json.dumps({"statusCode": 201, "headers": {}, "body": text})


def _stored_body(answer: str) -> Any:
    stored = json.loads(answer)
    if "bodyZ" in stored:
        return json.loads(zlib.decompress(base64.b64decode(stored["bodyZ"])))
    return json.loads(stored["body"])


def test_a_message_item_keeps_its_keys_and_loses_its_recipients_and_content() -> None:
    item = {
        "pk": {"S": "MSG#msg_1"},
        "sk": {"S": "MESSAGE"},
        "workspaceShard": {"S": "ws#3"},
        "status": {"S": "delivered"},
        "to": {"S": PHONE},
        "cc": {"L": [{"S": "ann@example.com"}]},
        "body": {"S": "secret"},
        "idempotencyKey": {"S": f"order:{PHONE[1:]}"},
        "metadata": {"M": {"note": {"S": f"call {PHONE}"}, "order": {"S": "42"}}},
        "attempts": {"N": "1"},
    }

    changed = erased_attributes(item, REDACTION)

    assert changed == {
        "to": {"S": ERASED},
        "cc": {"L": [{"S": ERASED}]},
        "body": {"S": ERASED},
        "idempotencyKey": {"S": ERASED},
        "metadata": {"M": {"note": {"S": ERASED}, "order": {"S": "42"}}},
    }
    assert erased_attributes({**item, **changed}, REDACTION) == {}  # erased again: nothing changes


def test_an_events_snapshot_is_erased_inside_its_json() -> None:
    item = {"pk": {"S": "EVT#evt_1"}, "messageId": {"S": "msg_1"}, "message": {"S": json.dumps(MESSAGE)}}

    changed = erased_attributes(item, REDACTION)

    assert json.loads(changed["message"]["S"]) == {
        "id": "msg_1",
        "to": ERASED,
        "body": ERASED,
        "metadata": {"n": ERASED, "k": "v"},
    }


def test_a_stored_answer_stays_json_whole_or_compressed() -> None:
    body = {"success": True, "message": MESSAGE}
    for packed in (False, True):
        record = {"id": {"S": "sendonce.v1.messages.send#abc"}, "data": {"S": _answer(body, packed=packed)}}

        changed = erased_attributes(record, REDACTION)

        assert _stored_body(changed["data"]["S"])["message"]["to"] == ERASED
        assert _stored_body(changed["data"]["S"])["message"]["body"] == ERASED
        assert json.loads(changed["data"]["S"])["statusCode"] == 201


def test_the_record_id_is_the_one_powertools_gives_the_workspace_and_key() -> None:
    layer = DynamoDBPersistenceLayer(table_name="t", boto3_client=object())
    layer.configure(idempotency_config(60), key_prefix=KEY_PREFIX)
    expected = layer._get_hashed_idempotency_key({"workspace": "ws_1", "key": "k-1", "payload": {}})

    assert idempotency_record_id(KEY_PREFIX, "ws_1", "k-1") == expected


def test_json_that_names_no_one_is_left_as_it_was_written() -> None:
    details = json.dumps({"reason": "opted_out", "note": "Grüße"})  # written with ensure_ascii
    answer = _answer({"success": True, "message": {"id": "msg_2", "to": "+15550100009", "body": "x"}})
    item = {"pk": {"S": "CMPERR#ws#cmp"}, "details": {"S": details}, "message": {"S": "bad line"}}

    assert erased_attributes(item, REDACTION) == {}
    assert erased_attributes({"id": {"S": "k"}, "data": {"S": answer}}, REDACTION) != {}  # its to, body
