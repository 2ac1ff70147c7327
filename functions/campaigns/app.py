"""Campaign function: the fan-out of campaigns (a plan, a page, a cancel's sweep), from the CampaignQueue."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.campaigns import handler, root

__all__ = ["handler", "root"]
