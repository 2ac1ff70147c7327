"""What the tiers of tests (and the bench) share: one HTTP test server, one free port, one Lambda context."""
