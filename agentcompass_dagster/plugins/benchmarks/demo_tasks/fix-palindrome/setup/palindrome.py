"""Palindrome detection."""


def is_palindrome(text):
    """Return True if text reads the same forwards and backwards.

    Case is ignored and only letters and digits are considered, so
    "A man, a plan, a canal: Panama" is a palindrome. The empty string
    is a palindrome.
    """
    cleaned = [c for c in text if c.isalnum()]
    return cleaned == cleaned[::-1]
