"""The simulator: the provider of every test message (CONTRACT section 12), one implementation for the
deployed stack and the local one."""
