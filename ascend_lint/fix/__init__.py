"""Fixes: deciding which may be applied, applying them with libcst, writing the files (libcst is imported
only here, and only when a fix is applied)."""
