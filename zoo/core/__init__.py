"""What every zoo model shares: export to `.aimodel`, run on the Core AI runtime, isolate
crashes in child processes, and records with provenance."""
