from palindrome import is_palindrome

assert is_palindrome("racecar")
assert is_palindrome("Racecar"), "case must be ignored"
assert is_palindrome("A man, a plan, a canal: Panama")
assert not is_palindrome("hello")
print("all tests passed")
