"""Delivery: at most one provider call that can deliver per message, and none left behind."""
