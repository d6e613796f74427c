"""Retention: what the system may forget, when, and a record of each prune."""
