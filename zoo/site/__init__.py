"""Site machinery: the page harness and the mkdocs hooks that render records."""
