"""Send controls: the frequency cap, quiet hours and expiry (docs/guarantees.md, "Send controls")."""
