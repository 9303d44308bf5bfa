import sys

from eoslog.cli import main

sys.exit(main())
