"""Adapters: the AWS and HTTP implementations of the domain's ports. Each takes its client."""
