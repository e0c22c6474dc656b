"""Path expressions of the WXQuery parser: child steps, their predicates, relative names.

Paths are the only navigation WXQuery has (child axis, element names, an attribute as the last
step, predicates that are conjunctions of comparisons), so this layer refuses every other axis
and step kind at the step where it appears. Predicates hold conditions, and conditions compare paths: the condition
grammar is the subclass ``ConditionParser``, and this layer reaches it through the abstract
``parse_conjunction``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from . import ast
from .namespace_parser import NamespaceParser
from .refused_constructs import DESCENDANT_AXIS_REFUSED, unexpected_in_condition


NAME_TEST_ONLY = ("inside a condition's path a predicate picks elements by name: an attribute or a child "
                  "equal to a string, e.g. $e/Param[@name = \"RA\"]/@value")


class PathParser(NamespaceParser, ABC):
    """Parses ``/step[predicate]...`` after a path's root."""

    @abstractmethod
    def parse_conjunction(self, in_predicate: bool) -> ast.Conjunction:
        """A conjunction of comparisons, as inside a predicate (see ``ConditionParser``)."""

    def read_step_name(self) -> tuple[str, int]:
        """One step's element name; every other kind of step is refused by name."""
        self.skip_ws()
        at = self.pos
        text = self.text
        if text.startswith("@", at):  # an attribute: "@name", the last step of a path
            self.pos += 1
            if self.text.startswith("*", self.pos):
                raise self.error("wildcards ('@*') are not supported: name each attribute", at)
            name, _ = self.read_name("an attribute name")
            return "@" + name, at
        if text.startswith("*:", at):
            raise self.error("wildcards ('*:name') are not supported: declare the namespace and name it, "
                             'e.g. declare namespace p = "…"; … /p:name')
        if text.startswith("*", at):
            raise self.error("wildcards ('*') are not supported: name each element")
        qualified = self.qualified_name(at, self.stream_steps > 0)
        self.stream_steps -= 1
        if qualified is not None:
            return qualified, at
        if text.startswith("..", at):
            raise self.error("the parent axis '..' is not supported")
        if text.startswith(".", at):
            raise self.error("'.' is not supported inside a path")
        name = self.peek_name()
        if name is None:
            raise self.expected("an element name")
        if text.startswith("::", at + len(name)):
            raise self.error(f"axis '{name}::' is not supported; WXQuery paths use the child axis '/'")
        if self.after_ws_is(at + len(name), "("):
            raise self.error(f"'{name}()' is not supported in a path: steps are element names")
        return self.read_name("an element name")

    def parse_steps(self, root: ast.PathRoot, start: int, in_condition: bool,
                    first_name: str | None = None, first_at: int | None = None) -> ast.PathExpr:
        steps: list[ast.Step] = []
        if first_name is not None:
            steps.append(self.finish_step(first_name, first_at, in_condition))
        elif not in_condition and self.peek("["):
            raise self.error("predicates are only supported on path steps, e.g. $p/en[. > 1]")
        while True:
            self.skip_ws()
            if self.text.startswith("//", self.pos):
                raise self.error(DESCENDANT_AXIS_REFUSED)
            if not self.text.startswith("/", self.pos):
                break
            self.pos += 1
            name, at = self.read_step_name()
            steps.append(self.finish_step(name, at, in_condition))
        self.count_path(_path_key(root, steps), start)
        return ast.PathExpr(root, tuple(steps), self.position(start))

    def finish_step(self, name: str, at: int, in_condition: bool) -> ast.Step:
        """The predicates ``[...]`` after a step's name (none inside a condition's operand). An
        attribute step ends its path: it has neither children nor predicates here."""
        if name.startswith("@"):
            self.skip_ws()
            if self.peek("[") or (self.peek("/") and not self.peek("//")):
                raise self.error(f"an attribute ends a path: nothing can follow {name}")
            return ast.Step(name, (), self.position(at))
        predicates = []
        after, self.stream_steps = self.stream_steps, 0  # (a predicate's paths are inside the items)
        try:
            bracket = self._predicates(predicates, in_condition)
        finally:
            self.stream_steps = after
        step = ast.Step(name, tuple(predicates), self.position(at))
        if in_condition and predicates and step.name_test is None:
            raise self.error(NAME_TEST_ONLY, bracket)
        return step

    def _predicates(self, predicates: list, in_condition: bool) -> int:
        """Each ``[...]`` after a step, into ``predicates``; the offset of the last '['."""
        bracket = self.pos
        while self.peek("["):
            bracket = self.pos
            if in_condition and predicates:
                raise self.error(NAME_TEST_ONLY, bracket)
            self.pos += 1
            self.skip_ws()
            if self.at_number() and self.after_number_is("]"):
                raise self.error("positional predicates ([1], [last()]) are not supported")
            predicates.append(self.parse_conjunction(in_predicate=True))
            if not self.accept("]"):
                raise unexpected_in_condition(self, "']' closing the predicate")
        return bracket

    def parse_relative_names(self) -> tuple[str, ...]:
        """``a/b/c`` without a root or predicates, as in a time window's reference path."""
        names = [self.read_step_name()[0]]
        while self.peek("/") and not names[-1].startswith("@"):
            if self.peek("//"):
                raise self.error(DESCENDANT_AXIS_REFUSED)
            self.pos += 1
            names.append(self.read_step_name()[0])
        return tuple(names)


def _path_key(root: ast.PathRoot, steps: list[ast.Step]) -> tuple:
    """What makes two paths the same path for the ``max_paths`` limit: root and names."""
    if isinstance(root, ast.VarRef):
        origin: tuple = ("$", root.name)
    elif isinstance(root, ast.StreamCall):
        origin = ("stream", root.name)
    else:
        origin = (".",)
    return origin + tuple(s.name for s in steps)
