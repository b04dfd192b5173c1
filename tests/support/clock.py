"""The time tests start their manual clocks at."""

NOW = 1_700_000_000_000  # ms since the epoch (2023-11-14T22:13:20Z): any fixed time in the past
