"""Providers: the last hop. SES for email, SNS for sms, and the HTTP provider for iMessage or any channel."""
