"""Provisioning a received node up to active: placement, links, ports, OS, driver, burn-in, join."""
