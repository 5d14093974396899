"""``builtin.calculator``: arithmetic by walking the parsed expression, never running it.

The expression is parsed (``ast.parse(mode="eval")``) and only a closed set of nodes is
evaluated: numbers, ``+ - * / // % **``, unary ``+``/``-``, parentheses, the constants in
:data:`CONSTANTS` and calls of the functions in :data:`FUNCTIONS` by bare name. Names,
attributes, subscripts, comprehensions, strings, keywords and every other construct are
refused before anything is computed. Every step is bounded: the expression's length, the
tree's depth and size, and the size of each integer, so ``9**9**9`` is refused by an
estimate of its size instead of being computed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from doraforge.registry.builtins.config import read_policy
from doraforge.registry.errors import ToolFailure

NAME = "builtin.calculator"
MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_DEPTH = 50
#: The largest integer any step may produce (about 1,233 decimal digits).
MAX_INT_BITS = 4096
MAX_ROUND_DIGITS = 100

type Number = int | float

CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _round(value: Number, digits: Number = 0) -> Number:
    """``round`` with a bounded digit count (a huge one makes Python build 10**n)."""
    if not isinstance(digits, int) or abs(digits) > MAX_ROUND_DIGITS:
        raise _limit(f"round() takes an integer digit count within ±{MAX_ROUND_DIGITS}")
    return round(value, digits) if digits else round(value)


#: Functions callable by bare name; each takes numbers only and none can run for long on
#: the bounded numbers this evaluator produces (no factorial, no comb).
FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "hypot": math.hypot,
    "floor": math.floor,
    "ceil": math.ceil,
}

ENTRY: dict[str, Any] = {
    "name": NAME,
    "providerName": "calculator",
    "description": (
        "Evaluate an arithmetic expression exactly and safely: numbers, + - * / // % **, "
        "parentheses, pi, e, tau and the functions abs, round, min, max, sqrt, exp, log, "
        "log10, log2, sin, cos, tan, asin, acos, atan, atan2, hypot, floor, ceil. "
        'Example: {"expression": "2 + 3 * 4"} gives 14.'
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_EXPRESSION_CHARS,
                "description": "The arithmetic expression, e.g. 'sqrt(2) * (3 + 4) ** 2'.",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
    "output_schema": {
        "type": "object",
        "properties": {"expression": {"type": "string"}, "value": {"type": "number"}},
        "required": ["expression", "value"],
        "additionalProperties": False,
    },
    "policy": read_policy("low", 2000, network=False),
}


def _invalid(message: str, construct: str | None = None) -> ToolFailure:
    details = {"construct": construct} if construct else {}
    return ToolFailure(
        "CALCULATOR_INVALID_EXPRESSION",
        f"{message}; use numbers, + - * / // % **, parentheses and the listed functions",
        details=details,
    )


def _limit(message: str) -> ToolFailure:
    return ToolFailure("CALCULATOR_LIMIT_EXCEEDED", f"{message}; use smaller numbers")


def _checked(value: Any) -> Number:
    """A step's result, refused when it is not a finite number or too large an integer."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid("the expression does not produce a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _limit("the result is not a finite number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _limit(f"an intermediate integer exceeds {MAX_INT_BITS} bits")
    return value


def _power(base: Number, exponent: Number) -> Number:
    """``base ** exponent`` after estimating the result's size from the logarithms, so a
    tower like ``9**9**9`` is refused without computing it."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise _limit(f"the power exceeds {MAX_INT_BITS} bits")
    elif abs(base) > 1 and abs(exponent) > 1 and abs(exponent) * math.log2(abs(base)) > 1024:
        raise _limit("the power overflows a float")  # as a float would, without trying
    return _checked(base**exponent)


class _Evaluator:
    """One evaluation: counts nodes and depth while walking the tree."""

    def __init__(self) -> None:
        self.nodes = 0

    def value(self, node: ast.AST, depth: int = 0) -> Number:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            raise _limit("the expression is too large or too deeply nested")
        if isinstance(node, ast.Expression):
            return self.value(node.body, depth + 1)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise _invalid("only numbers are allowed as literals", "Constant")
            return _checked(node.value)
        if isinstance(node, ast.Name):
            if node.id not in CONSTANTS:
                raise _invalid(f"unknown name {node.id!r}", "Name")
            return CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _checked(_UNARY[type(node.op)](self.value(node.operand, depth + 1)))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left = self.value(node.left, depth + 1)
            right = self.value(node.right, depth + 1)
            if isinstance(node.op, ast.Pow):
                return _power(left, right)
            return _checked(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise _invalid(f"{type(node).__name__} is not allowed", type(node).__name__)

    def call(self, node: ast.Call, depth: int) -> Number:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            shown = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
            raise _invalid(f"{shown} is not a callable function", "Call")
        if node.keywords:
            raise _invalid("keyword arguments are not allowed", "keyword")
        args = [self.value(arg, depth + 1) for arg in node.args]
        return _checked(FUNCTIONS[node.func.id](*args))


def evaluate(expression: str) -> Number:
    """The value of ``expression``; :class:`ToolFailure` ``CALCULATOR_INVALID_EXPRESSION``,
    ``CALCULATOR_LIMIT_EXCEEDED`` or ``CALCULATOR_MATH_ERROR`` otherwise."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise _limit(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _invalid("the expression is not valid arithmetic") from None
    try:
        return _Evaluator().value(tree)
    except ToolFailure:
        raise
    except ZeroDivisionError:
        raise ToolFailure("CALCULATOR_MATH_ERROR", "division by zero; change the divisor") from None
    except OverflowError:
        raise _limit("the result overflows") from None
    except (ValueError, TypeError) as exc:
        raise ToolFailure(
            "CALCULATOR_MATH_ERROR",
            f"the expression is outside a function's domain or arity ({exc}); fix its arguments",
        ) from None


async def calculate(arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's adapter: ``{"expression", "value"}``."""
    expression: str = arguments["expression"]
    return {"expression": expression, "value": evaluate(expression)}
