"""What every zoo model shares, one folder per job, each a floor above the ones it uses:
`io` (user files, writes without loss, records, the terminal), `checkpoint` (a Hugging Face
checkpoint read), `asset` (the contract between export and host), `compression`, `model` (a
decoder's building blocks in torch), `host` (the runtime side, no torch), `export`, `cli`,
and `isolate` (what may crash the runtime, run in a child process)."""
