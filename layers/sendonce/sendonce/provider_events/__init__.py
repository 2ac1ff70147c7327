"""Provider delivery events: signed webhooks and SES notifications, each applied once, status only forward."""
