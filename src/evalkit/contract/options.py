"""The schema of `trainer.options`: the keys an adapter reads, declared on its class as `option_names` (a tuple;
mixins add theirs, a class's keys are the union over its bases). A class whose chain declares none is not checked
(a third party's adapter may read any key). Read at compose time from the modules' source, so that checking a
config imports neither the adapter nor its wrapper nor torch; the adapter checks the same at construction."""
from __future__ import annotations

import ast
import contextlib
import difflib
import importlib.util
import sys
from typing import Any, Iterable

NOT_FOUND = object()


def declared_in(classes: Iterable[type]) -> frozenset[str] | None:
    """The union of `option_names` that these classes (an MRO) declare in their own body; None when none does."""
    found = [c.__dict__["option_names"] for c in classes if "option_names" in c.__dict__]
    return frozenset().union(*found) if found else None


def option_names(target: str) -> frozenset[str] | None:
    """The options the class `target` names reads; None when it declares none or cannot be read here."""
    module, _, name = target.rpartition(".")
    if module in sys.modules:
        cls = getattr(sys.modules[module], name, None)
        return declared_in(cls.__mro__) if isinstance(cls, type) else None
    with contextlib.suppress(Exception):   # no source to read: the adapter checks its options when built
        found = _from_source(module, name, depth=0)
        return None if found is NOT_FOUND else found
    return None


def _from_source(module: str, name: str, depth: int) -> Any:
    """`option_names` of class `name` in `module` and its bases, read from source: a frozenset, None (a base that
    cannot be read: unknown), or NOT_FOUND (the chain declares nothing)."""
    if depth > 8:
        return None
    spec = importlib.util.find_spec(module)
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = {alias.asname or alias.name: (_absolute(node, module), alias.name)
                for node in _top_level(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    if name not in classes:
        return _from_source(*imported[name], depth + 1) if name in imported else None
    node, names = classes[name], NOT_FOUND
    for statement in node.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None and any(
                isinstance(t, ast.Name) and t.id == "option_names"
                for t in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])):
            names = frozenset(ast.literal_eval(statement.value))
    for base in node.bases:
        if not isinstance(base, ast.Name):
            return None
        if base.id == "object":
            continue
        where = (module, base.id) if base.id in classes else imported.get(base.id)
        if where is None:
            return None
        inherited = _from_source(*where, depth + 1)
        if inherited is None:
            return None
        if inherited is not NOT_FOUND:
            names = inherited if names is NOT_FOUND else names | inherited
    return names


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, with those of an `if TYPE_CHECKING:` block: a package that hands out names on first
    use (`evalkit.contract`, through its `__getattr__`) imports them there for readers, so a base class taken from
    it is followed to the module that defines it."""
    found = []
    for node in tree.body:
        found.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            found += node.body
    return found


def _absolute(node: ast.ImportFrom, module: str) -> str:
    """The module a `from ... import` names, relative imports resolved against `module`."""
    if not node.level:
        return node.module or ""
    package = module.rsplit(".", node.level)[0]
    return f"{package}.{node.module}" if node.module else package


def unknown_options(given: Iterable[str], known: frozenset[str] | None, who: str) -> list[str]:
    """One line per key of `trainer.options` that `who` (the adapter class) does not read, with the nearest known
    key or the list of them; [] when `known` is None (nothing declared: not checked)."""
    if known is None:
        return []
    problems = []
    for key in sorted(set(given) - known):
        close = difflib.get_close_matches(key, sorted(known), n=1)
        takes = f"it takes {', '.join(sorted(known))}" if known else "it takes no options"
        fix = f"did you mean trainer.options.{close[0]}?" if close else f"remove it ({takes})"
        problems.append(f"trainer.options.{key} is not an option of {who} (it would be ignored): {fix}")
    return problems


def option_problems(trainer: Any) -> list[str]:
    """`unknown_options` for a composed trainer config, read without importing its adapter."""
    target, options = trainer.get("_target_"), trainer.get("options") or {}
    if not options or not isinstance(target, str):
        return []
    return unknown_options(list(options), option_names(target), target.rpartition(".")[2])
