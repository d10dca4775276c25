"""Benchmarks for acp-bridge (see bench/README.md)."""
