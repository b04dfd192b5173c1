"""Tests of the retention package: planning and applying retention."""
