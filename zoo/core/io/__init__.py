"""The ground floor's services: reading the files a user hands the zoo, writing without loss,
records with provenance, and what the terminal shows (progress, quiet libraries, Ctrl-C)."""
