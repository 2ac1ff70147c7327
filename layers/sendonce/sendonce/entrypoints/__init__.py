"""The functions' entry points: one module per function of template.yaml, and nothing else composes.

Each function's module holds what only a Lambda function has: its composition root (`build`, which
takes its settings and its clients, and `root`, which builds it once per execution environment with
the clients of `sendonce.aws_clients`), the reading of its event (the batch loop, each record's
parsing) and its `handler`. `functions/<name>/app.py` imports its module and exposes `handler`.

| function | module |
| --- | --- |
| ApiFunction | `api` (the routes and the preflight are `sendonce.api`'s) |
| Dispatch<Channel>Function | `dispatch` (one module; each function's file names its channel) |
| StatusFunction | `status` |
| OutboxFunction | `outbox` |
| HandoffFunction | `handoff` |
| MessageChangesFunction | `message_changes` |
| WebhookDeliveryFunction | `webhook_delivery` |
| ErasureFunction | `erasures` |

What more than one of them uses is in `shared/`: `sqs_batches` and `stream_records` (the two kinds
of batch Lambda hands over), `provider_registry` (the providers a dispatcher and the outbox choose
from) and `webhook_sending` (the checked sender of status webhooks, for the API and the delivery).
A new function is one module here, its `functions/<name>/app.py` and its block of template.yaml.

Dependencies run one way: entry points → the API and the domain ← adapters. The domain never imports
an adapter nor an entry point, adapters never import an entry point, and the API gets its adapters
through its entry point's root; no function's module imports another's. The import-linter contracts
in pyproject.toml say so, and `make lint` checks them.
"""
