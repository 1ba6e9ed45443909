"""The Core AI model zoo: export and run open LLMs on Apple's Core AI."""

__version__ = "0.1.0"

# Library warnings no zoo user can act on stay out of the output (ZOO_DEBUG=1 shows them).
from zoo.core.quiet import quiet_loggers  # noqa: E402

quiet_loggers()
