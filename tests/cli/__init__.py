"""Tests of logstore.cli: the logstore command's subcommands on real directories."""
