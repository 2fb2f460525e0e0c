"""The analysis layer: every fact a rule asks about, computed in one place.

Per file, `semantic.FileContext` (aliases -> qualified names, scopes, guards, NPU context); per project,
`summary` (each file's facts), `model` (the project's answers: class hierarchy, roles, migration, patches,
precision) and `view` (what one file's rules see, recorded as dependencies). Catalogue knowledge is data
(`data`, `training_code`). Imports only the rule API and the base modules (config, fileio).
"""
