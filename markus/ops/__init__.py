"""Operating Markus: ``/healthz`` (is this process's database, broker and channel layer
reachable) and ``/metrics`` (Prometheus, read from the database at scrape time)."""
