"""Outbound webhooks: signed deliveries of CMDB changes and ticket events to subscribed receivers."""
