"""The run pipeline: discover files -> resolve settings -> project index and model -> lint (in workers)
-> fix -> report. Every face (CLI, language server, flake8 plugin) runs through it."""
