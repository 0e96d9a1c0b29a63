"""Ten small functions, each still to be written: one fleet task per function."""


def add(a: int, b: int) -> int:
    raise NotImplementedError


def subtract(a: int, b: int) -> int:
    raise NotImplementedError


def multiply(a: int, b: int) -> int:
    raise NotImplementedError


def square(a: int) -> int:
    raise NotImplementedError


def negate(a: int) -> int:
    raise NotImplementedError


def double(a: int) -> int:
    raise NotImplementedError


def halve(a: int) -> int:
    """Rounded down."""
    raise NotImplementedError


def maximum(a: int, b: int) -> int:
    raise NotImplementedError


def minimum(a: int, b: int) -> int:
    raise NotImplementedError


def is_even(a: int) -> bool:
    raise NotImplementedError
