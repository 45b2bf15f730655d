#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f palindrome.py ] || fail "palindrome.py does not exist"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp palindrome.py "$tmp/palindrome.py"
python3 -I -B - "$tmp" <<'PY' || exit 1
import os
import sys
sys.path.insert(0, os.environ["JUDGE_DIR"])
from judge import isolated_module
try:
    is_palindrome = isolated_module(sys.argv[1] + "/palindrome.py").is_palindrome
except Exception as e:
    print("FAIL: cannot import palindrome.py: %r" % (e,))
    sys.exit(1)
cases = [
    ("racecar", True),
    ("Racecar", True),
    ("A man, a plan, a canal: Panama", True),
    ("No 'x' in Nixon", True),
    ("Was it a car or a cat I saw?", True),
    ("12321", True),
    ("", True),
    ("!!", True),
    ("a", True),
    ("hello", False),
    ("ab", False),
    ("Abca", False),
    ("123 45", False),
]
for text, exp in cases:
    try:
        got = is_palindrome(text)
    except Exception as e:
        print("FAIL: is_palindrome(%r) raised %r" % (text, e))
        sys.exit(1)
    if bool(got) is not exp or not isinstance(got, bool):
        print("FAIL: is_palindrome(%r) returned %r, expected %r" % (text, got, exp))
        sys.exit(1)
PY
echo "OK"
