"""Small helpers for working with integer ranges."""


def inclusive_range(start, end):
    """Return the list of integers from start to end, both inclusive.

    inclusive_range(1, 3) == [1, 2, 3]
    inclusive_range(5, 5) == [5]
    inclusive_range(4, 2) == []
    """
    return list(range(start, end))


def range_sum(start, end):
    """Return the sum of all integers from start to end, both inclusive."""
    return sum(inclusive_range(start, end))
