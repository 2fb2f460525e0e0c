"""Module names and import bindings of a project's files: which module an import loads, what a dotted name
written in a module stands for, where a re-exported name is defined (used while the model is built)."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from .records import Summary

ALIAS_DEPTH = 6  # re-exports followed (`from .impl import X` in a package __init__)
_UNSET: Any = object()  # (a memo's "not looked up yet": None is an answer)
_NO_SUMMARY = Summary()


def _dirname(rel: str) -> str:
    """posixpath.dirname for the model's relative paths (no trailing or doubled slashes), without its overhead."""
    return rel.rpartition("/")[0]


def _basename(rel: str) -> str:
    return rel.rpartition("/")[2]


def module_id(relpath: str) -> str:
    """`pkg/sub/mod.py` -> 'pkg.sub.mod'; `pkg/__init__.py` -> 'pkg'."""
    stem = relpath[:-4] if relpath.endswith(".pyi") else relpath[:-3] if relpath.endswith(".py") else relpath
    parts = [p for p in stem.split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Resolver:
    """Module names and import bindings of the project's files (used while building only)."""

    def __init__(self, files: Mapping[str, Summary]) -> None:
        self.files = dict(files)  # relpath -> summary
        self.by_id: Dict[str, str] = {}  # module id -> relpath
        for rel in sorted(self.files):
            mid = module_id(rel)
            if mid and (mid not in self.by_id or rel.endswith(".py")):
                self.by_id[mid] = rel
        packages = {_dirname(rel) for rel in self.files if _basename(rel) == "__init__.py"}
        self.package_dirs = packages
        self.aliases: Dict[str, List[str]] = {}  # package-chain name -> module ids
        self.path_dirs: Dict[str, str] = {}  # aliased module id -> the directory its chain name is relative to
        for mid, rel in self.by_id.items():
            chain, directory = self._chain_name(rel)
            if chain != mid:
                self.aliases.setdefault(chain, []).append(mid)
                self.path_dirs[mid] = sys.intern(directory)
        self.ids = {mid: mid for mid in self.by_id}  # (one string per module id: the memos share them)
        self._bindings: Dict[str, Dict[str, Tuple[str, bool]]] = {}
        self._pairs: Dict[Tuple[str, bool], Tuple[str, bool]] = {}  # one copy of each binding's target
        self._splits: Dict[str, Optional[Tuple[str, str]]] = {}
        self._bases: Dict[Tuple[str, int], Optional[str]] = {}  # (importer, level) -> relative_base
        self._found: Dict[Tuple[str, bool], Dict[str, Optional[str]]] = {}  # (directory, package?) -> name -> id
        # importer -> (its relpath, its directory, what imports from there find)
        self._homes: Dict[Optional[str], Tuple[str, str, Dict[str, Optional[str]]]] = {}

    def take(self, files: Mapping[str, Summary]) -> Set[str]:
        """Use these summaries of the same files from now on (`put` for each that changed). The changed
        module ids."""
        changed = set()
        for rel, summary in files.items():
            if self.files[rel] is not summary:
                self.put(rel, summary)
                changed.add(module_id(rel))
        return changed

    def put(self, rel: str, summary: Summary) -> None:
        """One file's new summary: the lookups made from its old one (its module's bindings, every `split`)
        are dropped."""
        self.files[rel] = summary
        self._bindings.pop(module_id(rel), None)
        self._splits.clear()

    def _chain_name(self, rel: str) -> Tuple[str, str]:
        """The name Python gives the module when the directory holding its outermost package is on sys.path,
        and that directory."""
        directory, _, base = rel.rpartition("/")
        parts: List[str] = []
        stem = base.rsplit(".", 1)[0]
        if stem != "__init__":
            parts.append(stem)
        while directory and directory in self.package_dirs:
            directory, _, name = directory.rpartition("/")
            parts.append(name)
        return ".".join(reversed(parts)), directory

    # --------------------------------------------------------------- modules
    def find_module(self, name: str, importer: Optional[str] = None) -> Optional[str]:
        """The module id an absolute import of `name` from module `importer` loads, if it is the project's."""
        if not name:
            return None
        home = self._homes.get(importer)
        if home is None:
            rel = self.by_id.get(importer, "") if importer is not None else ""
            directory = _dirname(rel)
            memo = self._found.setdefault((directory, rel.endswith("__init__.py")), {})
            home = self._homes[importer] = (rel, sys.intern(directory), memo)  # (one string per directory)
        rel, directory, memo = home
        found = memo.get(name, _UNSET)
        if found is _UNSET:
            found = self._find_module(name, importer, rel, directory)
            found = memo[name] = self.ids[found] if found is not None else None
        return found

    def _find_module(self, name: str, importer: Optional[str], rel: str, directory: str) -> Optional[str]:
        if importer is not None:  # a script's own directory comes first on sys.path
            if directory and directory not in self.package_dirs:
                local = f"{directory.replace('/', '.')}.{name}"
                if local in self.by_id:
                    return local
            elif not directory and name in self.by_id:
                return name
        candidates = self.aliases.get(name)
        if candidates and importer is not None:
            candidates = [c for c in candidates if self._visible(c, rel)]
        if candidates:
            if len(candidates) == 1:
                return candidates[0]
            if importer is not None:  # the one closest to the importer
                return max(candidates, key=lambda c: _common_prefix(c, importer))
            return None
        if name in self.by_id:
            return name
        if importer is not None and directory:  # a script run from inside a package directory
            local = f"{directory.replace('/', '.')}.{name}"
            if local in self.by_id:
                return local
        return None

    def _visible(self, mid: str, importer_rel: str) -> bool:
        """Can the importer see the module under its package-chain name? The directory that name starts from
        holds the importer (a script tree of its own; for a `src/` layout, the directory above `src/`), lies
        in the importer's directory (a library vendored and installed next to the script that uses it), or is
        the project root or a directory right below it (what a project installs). A package inside a sibling tree (another model's
        directory in a model zoo, a library vendored there) is not on the importer's path."""
        directory = self.path_dirs.get(mid, "")
        parent, _, last = directory.rpartition("/")
        if last == "src":  # a src/ layout: installed, seen from its whole project
            directory = parent
        if "/" not in directory or importer_rel.startswith(directory + "/"):
            return True
        home = _dirname(importer_rel)
        return not home or directory.startswith(home + "/")

    def relative_base(self, importer: str, level: int) -> Optional[str]:
        """The package a relative import of `level` dots in module `importer` starts from (memoised: a module
        has one per level, and a build reads every name its imports bind)."""
        key = (importer, level)
        if key not in self._bases:
            self._bases[key] = self._relative_base(importer, level)
        return self._bases[key]

    def _relative_base(self, importer: str, level: int) -> Optional[str]:
        rel = self.by_id.get(importer)
        if rel is None:
            return None
        parts = importer.split(".") if importer else []
        if _basename(rel) != "__init__.py":
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else None
        if parts is None:
            return None
        base = ".".join(parts)
        return self.ids.get(base, base)

    def bindings(self, mid: str) -> Dict[str, Tuple[str, bool]]:
        """Local name -> (absolute dotted target, is it a project target) for a module's imports (its own
        classes and functions are looked up in its summary: see `resolve`)."""
        found = self._bindings.get(mid)
        if found is not None:
            return found
        found = {}
        shared = self._pairs
        summary = self.files.get(self.by_id.get(mid, ""), _NO_SUMMARY)
        for module, name, asname, level, _line, _in_func in summary.imports:
            if name is None:  # `import a.b` binds a; `import a.b as c` binds c to a.b
                if asname:
                    local, target = asname, module
                else:
                    local = target = sys.intern(module.partition(".")[0])
                found_mid = self.find_module(target, mid)
                pair = (found_mid, True) if found_mid else (target, False)
            elif name == "*":
                continue
            else:
                local = asname or name
                if level:
                    base = self.relative_base(mid, level)
                    if base is None:
                        continue
                    source: Optional[str] = f"{base}.{module}" if base and module else (base or module)
                else:
                    source = self.find_module(module, mid)
                if source is None:
                    pair = (f"{module}.{name}", False)
                else:
                    target = f"{source}.{name}" if source else name
                    pair = (self.ids.get(target, target), True)  # (a module's own id string when it names one)
            if local not in found:  # (the first import of a name binds it; modules share their targets)
                found[local] = shared.setdefault(pair, pair)
        self._bindings[mid] = found
        return found

    def resolve(self, mid: str, dotted: str) -> Optional[Tuple[str, bool]]:
        """(absolute name, is it the project's) of a dotted name as written in module `mid`: its own class or
        top-level function, else what an import bound."""
        root, _, rest = dotted.partition(".")
        summary = self.files.get(self.by_id.get(mid, ""), _NO_SUMMARY)
        if root in summary.classes or root in summary.defs:
            target = f"{mid}.{root}" if mid else root
            return (f"{target}.{rest}" if rest else target), True
        bound = self.bindings(mid).get(root)
        if bound is None:
            return None
        target, project = bound
        return (f"{target}.{rest}" if rest else target), project

    def split(self, name: str) -> Optional[Tuple[str, str]]:
        """('module id', 'attr.path') for an absolute project name; follows re-exports. Remembered until a
        summary changes (`take`, `put`): it reads the classes, functions and imports of the modules it passes."""
        found = self._splits.get(name, _UNSET)
        if found is _UNSET:
            found = self._splits[name] = self._split(name)
        return found

    def _split(self, name: str) -> Optional[Tuple[str, str]]:
        for _ in range(ALIAS_DEPTH):
            end = len(name)  # the longest prefix that names a module first
            while end != -1:
                mid = self.ids.get(name[:end])  # (one string per module id: the memo holds many)
                if mid is None:
                    aliased = self.aliases.get(name[:end])
                    if not aliased or len(aliased) != 1:
                        end = name.rfind(".", 0, end)
                        continue
                    mid = aliased[0]
                rest = sys.intern(name[end + 1:])
                if not rest:
                    return mid, ""
                summary = self.files[self.by_id[mid]]
                head, _, tail = rest.partition(".")
                if head in summary.classes or head in summary.defs:
                    return mid, rest
                bound = self.bindings(mid).get(head)
                if bound is not None and bound[1] and bound[0] != f"{mid}.{head}":
                    name = bound[0] + ("." + tail if tail else "")
                    break  # follow the re-export
                return mid, rest
            else:
                return None
        return None


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        n += 1
    return n
