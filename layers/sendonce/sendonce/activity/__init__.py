"""What happened to a workspace's messages, as its people see it: a message's timeline, and the
promise's daily counts (`sendonce.activity.model`)."""
