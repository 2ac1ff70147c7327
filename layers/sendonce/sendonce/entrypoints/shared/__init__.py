"""What more than one entry point uses: the two kinds of batch Lambda hands over (`sqs_batches`,
`stream_records`), the providers a dispatcher and the outbox choose from (`provider_registry`) and
the checked sender of status webhooks (`webhook_sending`), and the sending store that charges the
daily quota (`sending_store`: the API's and the campaign fan-out's). No function's module is here."""
