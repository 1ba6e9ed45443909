"""The Core AI model zoo: export and run open LLMs on Apple's Core AI."""

__version__ = "0.1.0"
