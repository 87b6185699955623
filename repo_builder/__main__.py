import sys

from repo_builder.cli.main import main

sys.exit(main())
