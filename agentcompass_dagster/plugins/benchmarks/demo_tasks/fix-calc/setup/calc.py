"""A tiny calculator module."""


def add(a, b):
    return a + b


def subtract(a, b):
    """Return a minus b."""
    return b - a


def multiply(a, b):
    return a * b


def mean(values):
    """Return the arithmetic mean of a non-empty list of numbers."""
    return sum(values) // len(values)
