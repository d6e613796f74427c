"""Benchmarks run by ``manage.py bench <suite>``: each module has ``run(stdout, options)``."""
