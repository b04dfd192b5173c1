"""pytest-benchmark suites comparing logstore with peer libraries and raw file I/O."""
