"""The simulator: the provider of every test message (README, "Test mode"), one implementation for
the deployed stack and the local one."""
