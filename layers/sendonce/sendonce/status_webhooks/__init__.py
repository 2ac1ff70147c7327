"""Status webhooks: every committed change of a message told once to the customer's endpoints."""
