"""A customization's cost, measured from its source with `ast` alone (the analysed code is never imported).

What is measured (`analyse`):
- `lines_added`: the customization module's logical lines (`logical_lines`); `lines_total_plain`: the plain
  adapter's, for context.
- `wrapper_symbols`: the fully-qualified names the module takes from the wrapper's packages: every name imported
  from them (`from lightning.pytorch import Callback` -> `lightning.pytorch.Callback`, used or not) and every
  attribute chain rooted at an imported name (`import lightning as L` ... `L.Callback` -> `lightning.Callback`).
- `hooks_overridden`: the methods (dunder methods aside: constructors are not hooks) defined in classes that
  subclass a wrapper class or a class of the plain adapter module, directly or through another class of the
  module, or a class one of the adapter's methods returns (`class M(super().module_class())`), each with those
  base classes.
- `attributes_set`: attributes assigned (`=`, `+=`, annotated, `setattr`, `del`) on objects other than
  `self`/`cls`: the wrapper state the customization writes (`trainer.should_stop`).
- `private_touches`, one entry per distinct (kind, name), at its first line:
  `attribute`: a single-underscore attribute read or written (also via `getattr`/`setattr`/`hasattr`/`delattr`
  with a literal name) that the project's own code does not define: the customization, the plain adapter
  module, and the project modules (source outside site-packages and the standard library) their classes take
  base classes from, e.g. `evalkit.contract` for `self._effective` (`own_sources` lists them). Defines: a
  def/class of that name, an assignment to `self.`/`cls.` of it, a module- or class-level assignment;
  `import`: an absolute import of a module with a single-underscore path component, or of a single-underscore
  name (relative imports, the project's own, and names from the plain adapter module are exempt);
  `monkeypatch`: an assignment to (or `setattr`/`delattr` on) an attribute of something imported, the plain
  adapter module's names excepted (`transformers.Trainer.compute_loss = f`);
  `override`: a single-underscore method defined in a subclass of a wrapper class that the project's own code
  (as above) does not define and the customization never references itself: only the wrapper calls it, so it replaces a
  private method of the wrapper (a helper the module calls itself is not counted).

Name binding is approximated module-wide: an import inside a function binds its name everywhere.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import sysconfig
from dataclasses import asdict, dataclass, field
from typing import Any

_SELF_NAMES = ("self", "cls")
_ATTR_FUNCS = ("getattr", "setattr", "hasattr", "delattr")


@dataclass
class SourceCost:
    """One customization module's cost (see the module docstring for each field's rule)."""

    path: str
    lines_added: int = 0
    lines_total_plain: int | None = None
    wrapper_symbols: list[str] = field(default_factory=list)
    hooks_overridden: list[dict[str, Any]] = field(default_factory=list)
    attributes_set: list[str] = field(default_factory=list)
    private_touches: list[dict[str, Any]] = field(default_factory=list)
    own_sources: list[str] = field(default_factory=list)   # files whose definitions are the project's own
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def logical_lines(source: str) -> int:
    """Logical lines of code, counted on the syntax tree: each statement once however many physical lines it
    spans (a 5-line call is 1; `if x: y` is 2), each decorator once, each `except ...:` and `case ...:` clause
    once (they carry a test, like `elif`, which is a nested `if`); bare `else:`/`finally:`/`try:` keywords are
    part of their statement. Blank lines, comments and docstrings (a string expression as the first statement
    of a module, class or function) are not counted. Raises SyntaxError for source that does not parse."""
    tree = ast.parse(source)
    docstrings = {id(body[0]) for body in _bodies_with_docstrings(tree) if _is_docstring(body[0])}
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and id(node) not in docstrings:
            count += 1
            count += len(getattr(node, "decorator_list", ()))
        elif isinstance(node, (ast.ExceptHandler, ast.match_case)):
            count += 1
    return count


def analyse(custom_path: str, plain_path: str | None, wrapper_packages: tuple[str, ...]) -> SourceCost:
    """The cost of the customization module at `custom_path`, written beside the plain adapter module at
    `plain_path` (None: none), for a wrapper whose importable packages are `wrapper_packages`. Never raises: a
    file that cannot be read or parsed leaves a note (and, for the customization, the counts at zero)."""
    cost = SourceCost(path=custom_path)
    custom = _parse(custom_path, "customization", cost.notes)
    plain = _parse(plain_path, "plain adapter", cost.notes) if plain_path else None
    if plain is not None:
        cost.lines_total_plain = plain[1]
    if custom is None:
        return cost
    tree, cost.lines_added = custom
    plain_tree = plain[0] if plain is not None else None
    plain_stem = os.path.splitext(os.path.basename(plain_path))[0] if plain_path else None
    own_defined = _defined_names(plain_tree) if plain_tree is not None else set()
    cost.own_sources = [plain_path] if plain_tree is not None else []
    trees = [tree] + ([plain_tree] if plain_tree is not None else [])
    try:
        base_modules = _project_base_modules(trees, tuple(wrapper_packages))
    except Exception as exc:   # a parent package that fails to import: measure without its definitions
        base_modules = []
        cost.notes.append(f"the project's base class modules could not be located ({exc!r}): their private "
                          "names count as touches")
    for path in base_modules:
        if os.path.realpath(path) in {os.path.realpath(p) for p in [custom_path, *cost.own_sources]}:
            continue
        parsed = _parse(path, "base class module", cost.notes)
        if parsed is not None:
            own_defined |= _defined_names(parsed[0])
            cost.own_sources.append(path)
    scanner = _Scanner(tuple(wrapper_packages), plain_tree, plain_stem, own_defined)
    scanner.scan(tree)
    cost.wrapper_symbols = sorted(scanner.symbols)
    cost.hooks_overridden = scanner.hooks
    cost.attributes_set = sorted(scanner.attributes_set)
    cost.private_touches = scanner.private_touches()
    return cost


def cost_for(module_name: str, plain_module: str | None = None,
             wrapper_packages: tuple[str, ...] = ()) -> SourceCost:
    """`analyse` for dotted module names (`evalkit.adapters.custom.lightning_loss`,
    `evalkit.adapters.lightning_trainer`), their
    files found with `importlib.util.find_spec` (which imports a submodule's parent packages, never the module)."""
    plain_path = module_path(plain_module) if plain_module else None
    return analyse(module_path(module_name), plain_path, wrapper_packages)


def module_path(module_name: str) -> str:
    """The .py file of the module `module_name`, found without importing it (only its parent packages are).
    Raises ValueError if there is none, or if a parent is a module (a class path such as `pkg.module.Class`:
    looking inside `pkg.module` would import it)."""
    parts = module_name.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as exc:
            raise ValueError(f"module {module_name!r} cannot be located ({exc}): give a module's dotted name "
                             "whose parent packages are importable") from exc
        if spec is None:
            raise ValueError(f"module {module_name!r} cannot be located ({name!r} is not found): give a module's "
                             "dotted name whose parent packages are importable")
        if depth < len(parts) and spec.submodule_search_locations is None:
            raise ValueError(f"{module_name!r} names something inside the module {name!r}, not a module: give the "
                             f"module's name ({name!r}), not a class path")
    if not spec.origin or not spec.origin.endswith(".py"):
        raise ValueError(f"module {module_name!r} has no Python source file: give the dotted name of a .py module")
    return spec.origin


# ---------------------------------------------------------------------------------------------- internals
def _parse(path: str, role: str, notes: list[str]) -> tuple[ast.Module, int] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        notes.append(f"the {role} source {path} could not be read ({exc}): not measured")
        return None
    try:
        return ast.parse(source, filename=path), logical_lines(source)
    except (SyntaxError, ValueError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, SyntaxError) and exc.lineno else ""
        notes.append(f"the {role} source {path} does not parse{where} ({exc.__class__.__name__}: "
                     f"{getattr(exc, 'msg', exc)}): not measured")
        return None


def _bodies_with_docstrings(tree: ast.Module):
    yield tree.body
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.body


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_private(name: str) -> bool:
    """A single-underscore name (`_x`), not a dunder (`__x__`)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"


def _targets(node: ast.AST):
    """The individual assignment targets in `a, (b.c, *d) = ...`."""
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def _assigned(node: ast.AST) -> list[ast.AST]:
    """The targets a statement assigns or deletes (for loops and `with ... as` included)."""
    if isinstance(node, ast.Assign):
        roots = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        roots = [node.target]
    elif isinstance(node, ast.Delete):
        roots = node.targets
    elif isinstance(node, ast.withitem):
        roots = [node.optional_vars] if node.optional_vars is not None else []
    elif isinstance(node, ast.NamedExpr):
        roots = [node.target]
    else:
        return []
    return [t for root in roots for t in _targets(root)]


def _attr_call(node: ast.AST) -> tuple[str, ast.AST, str] | None:
    """(function, object, name) for `getattr(obj, "name"...)` and its siblings with a literal name."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTR_FUNCS
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return node.func.id, node.args[0], node.args[1].value
    return None


def _defined_names(tree: ast.Module) -> set[str]:
    """The names a module defines: defs and classes, `self.`/`cls.` attributes it assigns (also by `setattr`),
    and names assigned at module or class level."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, (ast.Module, ast.ClassDef)):
            for stmt in node.body:
                names.update(t.id for t in _assigned(stmt) if isinstance(t, ast.Name))
        for target in _assigned(node):
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id in _SELF_NAMES:
                names.add(target.attr)
        call = _attr_call(node)
        if call and call[0] == "setattr" and isinstance(call[1], ast.Name) and call[1].id in _SELF_NAMES:
            names.add(call[2])
    return names


def _import_map(tree: ast.Module) -> dict[str, str]:
    """Each name the module's imports bind (anywhere in it), with the qualified name it stands for."""
    imports: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                imports[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name != "*":
                    imports[alias.asname or alias.name] = _join(module, alias.name)
    return imports


def _project_base_modules(trees: list[ast.Module], wrapper_packages: tuple[str, ...]) -> list[str]:
    """The project's own modules (source outside site-packages and the standard library) that the classes of
    `trees` take base classes from (`evalkit.contract.adapter` for `WrapperAdapter`, which adapters import from
    `evalkit.contract`); found without importing them."""
    modules: set[tuple[str, str]] = set()   # (module, class name)
    for tree in trees:
        imports = _import_map(tree)
        for node in ast.walk(tree):
            for base in node.bases if isinstance(node, ast.ClassDef) else ():
                root = base
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in imports:
                    qualified = imports[root.id] + ast.unparse(base)[len(root.id):]
                    parts = qualified.rsplit(".", 1)
                    modules.add((parts[0], parts[-1]))
    own = []
    for module, name in sorted(modules):
        if module.startswith(".") or any(module == p or module.startswith(p + ".") for p in wrapper_packages):
            continue
        try:
            top = importlib.util.find_spec(module.split(".")[0])   # a top-level spec imports nothing
        except (ImportError, ValueError):
            continue
        where = (top.origin or next(iter(top.submodule_search_locations or ()), None)) if top else None
        if where is None or not _is_project_file(where):
            continue
        try:
            path = module_path(_defining_module(module, name))
        except ValueError:
            continue
        if path not in own:
            own.append(path)
    return own


def _defining_module(module: str, name: str) -> str:
    """The module whose source defines the class `name` that `module` offers: `module` itself, or the module it
    imports the class from (a package that hands out names on first use, as `evalkit.contract` does, imports them
    under `if TYPE_CHECKING:`), followed without importing either."""
    for _ in range(8):
        try:
            with open(module_path(module), encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            return module
        target = _import_map(tree).get(name, "")
        if name in _class_names(tree) or not target or target.startswith(".") or "." not in target:
            return module
        module = target.rsplit(".", 1)[0]
    return module


def _is_project_file(path: str) -> bool:
    """Source outside site-packages/dist-packages and the standard library."""
    real = os.path.realpath(path)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    return not ({"site-packages", "dist-packages"} & set(real.split(os.sep))) and not real.startswith(stdlib + os.sep)


def _class_names(tree: ast.Module | None) -> set[str]:
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)} if tree is not None else set()


class _Scanner(ast.NodeVisitor):
    """One pass over the customization's tree, collecting what `SourceCost` reports."""

    def __init__(self, wrapper_packages: tuple[str, ...], plain_tree: ast.Module | None, plain_stem: str | None,
                 own_defined: set[str]):
        self.packages = wrapper_packages
        self.plain_stem = plain_stem
        self.plain_classes = _class_names(plain_tree)
        self.own_defined = own_defined               # defined by the plain adapter and the project's base modules
        self.imports: dict[str, str] = {}          # bound name -> the qualified name it stands for
        self.symbols: set[str] = set()
        self.attributes_set: set[str] = set()
        self.hooks: list[dict[str, Any]] = []
        self._touches: dict[tuple[str, str], int] = {}
        self._hook_classes: dict[str, list[str]] = {}   # local class -> its wrapper/plain bases
        self._wrapper_classes: set[str] = set()          # local classes with a wrapper class among their bases
        self._covered: set[int] = set()                  # nodes inside an already-recorded attribute chain
        self._patch_targets: set[int] = set()            # attribute nodes recorded as monkeypatches
        self._private_methods: list[tuple[str, str, int]] = []
        self._referenced: set[str] = set()

    # -------------------------------------------------------------- driver
    def scan(self, tree: ast.Module) -> None:
        self.defined = _defined_names(tree) | self.own_defined
        self.imports = _import_map(tree)
        self.visit(tree)
        for cls, name, line in self._private_methods:
            if name not in self._referenced and name not in self.own_defined:
                self._touch("override", f"{cls}.{name}", line)

    def private_touches(self) -> list[dict[str, Any]]:
        return [{"kind": kind, "name": name, "line": line}
                for (kind, name), line in sorted(self._touches.items(), key=lambda kv: (kv[1], kv[0]))]

    # -------------------------------------------------------------- resolution
    def _qualify(self, node: ast.AST) -> str | None:
        """The qualified name of `Name`/`Attribute` chains rooted at an imported name, else None."""
        if isinstance(node, ast.Name):
            return self.imports.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._qualify(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None

    def _is_wrapper(self, qualified: str) -> bool:
        return any(qualified == p or qualified.startswith(p + ".") for p in self.packages)

    def _is_plain(self, qualified: str) -> bool:
        """A name taken from the plain adapter module (`evalkit.adapters.lightning_trainer.LightningAdapter`)."""
        return "." in qualified and self._is_plain_module(qualified.rsplit(".", 1)[0])

    def _is_plain_module(self, module: str) -> bool:
        return self.plain_stem is not None and module.lstrip(".").rsplit(".", 1)[-1] == self.plain_stem

    # -------------------------------------------------------------- imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if any(_is_private(part) for part in alias.name.split(".")):
                self._touch("import", alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            qualified = _join(module, alias.name)
            if self._is_wrapper(qualified) and alias.name != "*":
                self.symbols.add(qualified)
            if module.startswith(".") or self._is_plain_module(module):   # the project's own
                continue
            if any(_is_private(part) for part in module.split(".")) or _is_private(alias.name):
                self._touch("import", qualified, node.lineno)

    # -------------------------------------------------------------- names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._referenced.add(node.id)
        if id(node) not in self._covered and node.id in self.imports and self._is_wrapper(self.imports[node.id]):
            self.symbols.add(self.imports[node.id])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self._referenced.add(node.attr)
        qualified = self._qualify(node)
        if qualified is not None:
            if id(node) not in self._covered and self._is_wrapper(qualified):
                self.symbols.add(qualified)
            self._covered.add(id(node.value))
        if _is_private(node.attr) and node.attr not in self.defined and id(node) not in self._patch_targets:
            self._touch("attribute", self._text(node), node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        call = _attr_call(node)
        if call is not None:
            func, obj, name = call
            self._referenced.add(name)
            text = f"{self._text(obj)}.{name}"
            writes = func in ("setattr", "delattr")
            if writes and self._patches(obj):
                self._touch("monkeypatch", text, node.lineno)
            elif _is_private(name) and name not in self.defined:
                self._touch("attribute", text, node.lineno)
            if writes and not (isinstance(obj, ast.Name) and obj.id in _SELF_NAMES):
                self.attributes_set.add(text)
        self.generic_visit(node)

    # -------------------------------------------------------------- assignments
    def _assignment(self, node: ast.AST) -> None:
        for target in _assigned(node):
            if not isinstance(target, ast.Attribute):
                continue
            if isinstance(target.value, ast.Name) and target.value.id in _SELF_NAMES:
                continue
            text = self._text(target)
            self.attributes_set.add(text)
            if self._patches(target.value):
                self._patch_targets.add(id(target))
                self._touch("monkeypatch", text, target.lineno)
        self.generic_visit(node)

    visit_Assign = visit_AugAssign = visit_AnnAssign = visit_Delete = _assignment
    visit_For = visit_AsyncFor = visit_withitem = visit_NamedExpr = _assignment

    def _patches(self, obj: ast.AST) -> bool:
        """Whether `obj` is something imported (a module, a class), not the plain adapter module's own."""
        qualified = self._qualify(obj)
        return qualified is not None and not self._is_plain(qualified) and not qualified.startswith(".")

    # -------------------------------------------------------------- classes and hooks
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases: list[str] = []
        wrapper = False
        for base in node.bases:
            qualified = self._qualify(base)
            if qualified is not None and self._is_wrapper(qualified):
                bases.append(qualified)
                wrapper = True
            elif qualified is not None and self._is_plain(qualified):
                bases.append(qualified)
            elif isinstance(base, ast.Name) and base.id in self._hook_classes:
                bases.extend(b for b in self._hook_classes[base.id] if b not in bases)
                wrapper = wrapper or base.id in self._wrapper_classes
            elif qualified is None and isinstance(base, ast.Name) and base.id in self.plain_classes:
                bases.append(f"{self.plain_stem}.{base.id}")   # a plain adapter's class obtained at run time
            elif _is_factory_call(base):
                # `class L1Module(super().module_class())`: a class the adapter builds at run time (a wrapper's
                # subclass, which its own code defines): its methods are hooks, a private one is an override.
                bases.append(ast.unparse(base))
                wrapper = True
        if bases:
            self._hook_classes[node.name] = bases
            if wrapper:
                self._wrapper_classes.add(node.name)
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_dunder(stmt.name):
                    self.hooks.append({"name": stmt.name, "base": ", ".join(bases), "class": node.name,
                                       "line": stmt.lineno})
                    if wrapper and _is_private(stmt.name):
                        self._private_methods.append((node.name, stmt.name, stmt.lineno))
        self.generic_visit(node)

    # -------------------------------------------------------------- helpers
    def _touch(self, kind: str, name: str, line: int) -> None:
        key = (kind, name)
        self._touches[key] = min(line, self._touches.get(key, line))

    def _text(self, node: ast.AST) -> str:
        qualified = self._qualify(node)
        return qualified if qualified is not None else ast.unparse(node)


def _is_factory_call(node: ast.AST) -> bool:
    """`super().name(...)` or `self.name(...)`: a class returned by one of the adapter's own methods."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    owner = node.func.value
    return (isinstance(owner, ast.Name) and owner.id == "self") or (
        isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super")


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _join(module: str, name: str) -> str:
    return f"{module}{name}" if module.endswith(".") or not module else f"{module}.{name}"
