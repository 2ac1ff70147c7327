"""What more than one entry point uses: the two kinds of batch Lambda hands over (`sqs_batches`,
`stream_records`), the providers a dispatcher and the outbox choose from (`provider_registry`) and
the checked sender of status webhooks (`webhook_sending`). No function's module is here."""
