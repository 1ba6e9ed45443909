"""The command line: `zoo export | generate` and `python -m zoo.<model> export | generate`,
parsed (`arguments`) and carried out (`commands`)."""
