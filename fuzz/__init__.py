"""Coverage-guided fuzzing of every decoder a peer or a client reaches (atheris; docs/fuzzing.md)."""
