"""Built-in rule packs of ascend-lint, installed as `ascend_lint_plugins` and loaded through the
`ascend_lint.plugins` entry point group exactly like third-party packs."""
