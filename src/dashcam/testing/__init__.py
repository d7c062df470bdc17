"""Planted-data builders: ``builder.ExportBuilder`` writes Nsight Systems SQLite exports in the real
schema with facts known by construction; ``scenarios`` are the named workloads built with it (the
example profile, the eval cases and the tests use them). Shipped, since ``dashcam eval`` needs them."""
