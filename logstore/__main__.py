"""`python -m logstore` runs the logstore command line."""

from logstore.cli import main

raise SystemExit(main())
