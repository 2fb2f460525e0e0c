"""The engine: one file in, findings out (read -> decode -> pre-filter -> parse -> one walk -> noqa).

`linter.Linter` runs the enabled rules over one shared `ast` walk (`walker`), pruned by the rules'
trigger texts (`triggers`); `noqa` applies suppression comments. It asks the analysis layer for facts.
"""
