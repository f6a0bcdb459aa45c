"""Warehouse services: the ledger (moves of cards, parts and consumables), minimum stock, the WMS, stock reads."""
