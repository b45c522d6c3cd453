"""`python -m coresets_jax.cli`: the same as the `coresets-jax` command."""

import sys

from . import main

sys.exit(main())
