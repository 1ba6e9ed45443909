"""`python -m zoo.bench`: speed of the zoo models at real shapes (`zoo.bench.__main__`)."""
