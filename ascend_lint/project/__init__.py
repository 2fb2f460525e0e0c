"""The project model: facts that live in other files (issue 12).

`summary` extracts each file's facts, `model` builds the project's answers from them, `view` is what one
file's rules see (and records as dependencies), `index` lists and summarises a project's files with the
cache, `root` finds the project root. Catalogue knowledge (third-party bases, migrating modules) is in `data`.
"""
