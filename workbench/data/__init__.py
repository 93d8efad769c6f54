"""Data stage: dataset registry, downloads, parsers, the synthetic default and preprocessing."""
