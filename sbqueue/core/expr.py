"""A tiny expression language for row transformations, with SQL's null rules.

Why: every state change of a message (deliver, retire, settle) must be written once, be
testable on plain Python rows without Spark, and run inside Spark as one projection. A rule
is therefore an ``Expr`` tree: ``evaluate(row)`` runs it on a mapping, and
``sbqueue.engine.columns.to_sql`` compiles the same tree to Spark SQL.

Null semantics follow Spark SQL: comparisons and arithmetic with NULL give NULL; AND / OR /
NOT are three-valued; ``when`` treats a NULL condition as false.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Expr", "Row", "Template", "coalesce", "col", "greatest", "lit", "when"]

Row = Mapping[str, Any]


class Expr:
    """A node of an expression tree; Python operators build bigger trees."""

    def evaluate(self, row: Row) -> Any:
        raise NotImplementedError

    def compiled(self) -> Callable[[Row], Any]:
        """``evaluate`` as one Python function, for a rule applied to many rows: the same
        results (tests hold it to the interpreter), without a method call per node. Made
        once per tree, and once per shape of tree (its literals apart) per process: a rule
        built per call with the call's time compiles once."""
        made: Callable[[Row], Any] | None = self.__dict__.get("_compiled")
        if made is None:
            made = _compile(self)
            object.__setattr__(self, "_compiled", made)
        return made

    # comparisons and arithmetic
    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Op("==", (self, _wrap(other)))

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return Op("!=", (self, _wrap(other)))

    def __lt__(self, other: Any) -> Expr:
        return Op("<", (self, _wrap(other)))

    def __le__(self, other: Any) -> Expr:
        return Op("<=", (self, _wrap(other)))

    def __gt__(self, other: Any) -> Expr:
        return Op(">", (self, _wrap(other)))

    def __ge__(self, other: Any) -> Expr:
        return Op(">=", (self, _wrap(other)))

    def __add__(self, other: Any) -> Expr:
        return Op("+", (self, _wrap(other)))

    # three-valued logic
    def __and__(self, other: Any) -> Expr:
        return Op("and", (self, _wrap(other)))

    def __or__(self, other: Any) -> Expr:
        return Op("or", (self, _wrap(other)))

    def __invert__(self) -> Expr:
        return Op("not", (self,))

    def is_null(self) -> Expr:
        return Op("is_null", (self,))

    def is_not_null(self) -> Expr:
        return Op("is_not_null", (self,))

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Col(Expr):
    name: str

    def evaluate(self, row: Row) -> Any:
        return row[self.name]


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    value: Any

    def evaluate(self, row: Row) -> Any:
        return self.value


@dataclass(frozen=True, eq=False)
class Op(Expr):
    name: str
    args: tuple[Expr, ...]

    def evaluate(self, row: Row) -> Any:
        if self.name == "and":
            return _and(self.args[0].evaluate(row), self.args[1].evaluate(row))
        if self.name == "or":
            return _or(self.args[0].evaluate(row), self.args[1].evaluate(row))
        values = [a.evaluate(row) for a in self.args]
        if self.name == "is_null":
            return values[0] is None
        if self.name == "is_not_null":
            return values[0] is not None
        if self.name == "coalesce":
            return next((v for v in values if v is not None), None)
        if self.name == "greatest":
            present = [v for v in values if v is not None]
            return max(present) if present else None
        if any(v is None for v in values):
            return None
        return _STRICT[self.name](*values)


@dataclass(frozen=True, eq=False)
class When(Expr):
    """CASE WHEN c1 THEN v1 ... ELSE otherwise END."""

    branches: tuple[tuple[Expr, Expr], ...]
    default: Expr

    def when(self, condition: Expr, value: Any) -> When:
        return When((*self.branches, (condition, _wrap(value))), self.default)

    def otherwise(self, value: Any) -> When:
        return When(self.branches, _wrap(value))

    def evaluate(self, row: Row) -> Any:
        for condition, value in self.branches:
            if condition.evaluate(row) is True:
                return value.evaluate(row)
        return self.default.evaluate(row)


_STRICT: dict[str, Callable[..., Any]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "+": lambda a, b: a + b,
    "not": lambda a: not a,
}


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


# Python source of a tree: a literal is ``c[i]``; an operand tested and then used is held in
# a local (``_vN``) and a node the tree holds in several places is computed once, first
# (``_sN``), so the function does at most what ``evaluate`` does, once per node.
_BINARY = {"==", "!=", "<", "<=", ">", ">=", "+"}
_FACTORIES: dict[str, Callable[[tuple[Any, ...]], Callable[[Row], Any]]] = {}


class _Source:
    def __init__(self, root: Expr) -> None:
        self.consts: list[Any] = []
        self.lines: list[str] = []
        self.held = 0
        self.shared = _shared(root)
        self.named: dict[int, str] = {}
        self.body = self.of(root)

    def local(self, prefix: str = "_v") -> str:
        self.held += 1
        return f"{prefix}{self.held}"

    def of(self, e: Expr) -> str:
        name = self.named.get(id(e))
        if name is not None:
            return name
        text = self.text(e)
        if id(e) in self.shared:
            name = self.named[id(e)] = self.local("_s")
            self.lines.append(f"{name} = {text}")
            return name
        return text

    def text(self, e: Expr) -> str:
        if isinstance(e, Col):
            return f"row[{e.name!r}]"
        if isinstance(e, Lit):
            self.consts.append(e.value)
            return f"c[{len(self.consts) - 1}]"
        if isinstance(e, When):
            out = self.of(e.default)
            for condition, value in reversed(e.branches):
                out = f"({self.of(value)} if {self.of(condition)} is True else {out})"
            return out
        assert isinstance(e, Op), e
        return self.op(e.name, [self.of(a) for a in e.args])

    def op(self, name: str, args: list[str]) -> str:
        if name in ("is_null", "is_not_null"):
            return f"({args[0]} is {'' if name == 'is_null' else 'not '}None)"
        if name in ("coalesce", "greatest"):
            return f"_{name}({', '.join(args)})"
        a = self.local()
        if name == "not":
            return f"(None if ({a} := {args[0]}) is None else not {a})"
        b = self.local()
        if name == "and":
            return (f"(False if ({a} := {args[0]}) is False or ({b} := {args[1]}) is False "
                    f"else None if {a} is None or {b} is None else True)")
        if name == "or":
            return (f"(True if ({a} := {args[0]}) is True or ({b} := {args[1]}) is True "
                    f"else None if {a} is None or {b} is None else False)")
        assert name in _BINARY, name
        return (f"(None if ({a} := {args[0]}) is None or ({b} := {args[1]}) is None "
                f"else {a} {name} {b})")

    def factory(self) -> Callable[[tuple[Any, ...]], Callable[[Row], Any]]:
        code = "".join(f"        {line}\n" for line in [*self.lines, f"return {self.body}"])
        made = _FACTORIES.get(code)
        if made is None:
            scope: dict[str, Any] = {"_coalesce": _coalesce, "_greatest": _greatest}
            # the source holds only quoted column names and c[i]: literals stay values
            exec(compile(f"def make(c):\n    def rule(row):\n{code}    return rule\n",
                         "<sbqueue rule>", "exec"), scope)
            made = scope["make"]
            if len(_FACTORIES) > 4096:  # shapes come from code: a bound, never reached
                _FACTORIES.clear()
            _FACTORIES[code] = made
        return made


def _shared(root: Expr) -> set[int]:
    """The operators and cases ``root`` holds in more than one place."""
    seen: set[int] = set()
    shared: set[int] = set()
    stack = [root]
    while stack:
        e = stack.pop()
        if isinstance(e, (Col, Lit)):
            continue
        if id(e) in seen:
            shared.add(id(e))
            continue
        seen.add(id(e))
        if isinstance(e, Op):
            stack.extend(e.args)
        elif isinstance(e, When):
            stack.append(e.default)
            stack.extend(part for branch in e.branches for part in branch)
    return shared


def _compile(e: Expr) -> Callable[[Row], Any]:
    source = _Source(e)
    return source.factory()(tuple(source.consts))


class Template:
    """Rules compiled once with some literals marked, made per use with those literals
    filled (``fill``): a receive's rules differ from call to call only in its times, so a
    process compiles them once (``core.transitions.receive_rules``). A marked literal is the
    very object passed in ``marks`` (identity), and only as a literal: a builder that
    branches on a marked value in Python is not templated."""

    def __init__(self, rules: Mapping[str, Expr], marks: Mapping[str, Any]) -> None:
        self._made = []
        for name, rule in rules.items():
            source = _Source(rule)
            slots = {i: mark for i, value in enumerate(source.consts)
                     for mark, marked in marks.items() if value is marked}
            self._made.append((name, source.factory(), tuple(source.consts), slots))

    def fill(self, **values: Any) -> dict[str, Callable[[Row], Any]]:
        """Each rule as a function of a row, with the marked literals ``values``."""
        return {name: factory(tuple(values[slots[i]] if i in slots else value
                                    for i, value in enumerate(consts)))
                for name, factory, consts, slots in self._made}


def _coalesce(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _greatest(*values: Any) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _wrap(value: Any) -> Expr:
    return value if isinstance(value, Expr) else Lit(value)


def col(name: str) -> Expr:
    return Col(name)


def lit(value: Any) -> Expr:
    return Lit(value)


def when(condition: Expr, value: Any) -> When:
    return When(((condition, _wrap(value)),), Lit(None))


def coalesce(*values: Any) -> Expr:
    return Op("coalesce", tuple(_wrap(v) for v in values))


def greatest(*values: Any) -> Expr:
    return Op("greatest", tuple(_wrap(v) for v in values))
