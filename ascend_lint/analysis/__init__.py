"""The analysis layer: every fact a rule asks about, computed in one place (docs/analysis.md).

Typed, versioned records (`records`: a file's `Summary` and its parts; `Role`, `Reason`, `Place`, `Precision`,
`ModuleFacts`), and the questions a file's rules may ask (`questions`). Per file, the semantic model
`semantic.FileContext` (with its facets `steps`, `scopes`, `reasons`); per project, the summaries
(`summary`, from `textscan` and `factlines` on the text, `precision` and the step loops on the tree), the model
built from them (`model`: `resolver`, `builder` with `roles` and `contexts`, answers in `tables`) and `view`
(what one file's rules see, recorded as deps). Catalogue knowledge is data (`data`, `training_code`).

Modules import one way, from `records` up to `view` (tests/test_analysis_records.py checks it), and nothing
above the rule API and the base modules (rule, fileio, compat).
"""
