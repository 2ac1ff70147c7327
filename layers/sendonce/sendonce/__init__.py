"""sendonce: send a message once, whatever the network, the client or the cloud do."""
