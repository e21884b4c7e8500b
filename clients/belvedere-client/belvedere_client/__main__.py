"""``python -m belvedere_client report CLUSTER JOB_ID``: the same as the ``belvedere`` command."""
import sys

from .cli import main

sys.exit(main())
