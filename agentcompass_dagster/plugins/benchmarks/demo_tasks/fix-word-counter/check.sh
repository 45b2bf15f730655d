#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f wordcount.py ] || fail "wordcount.py does not exist"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp wordcount.py "$tmp/wordcount.py"
printf 'The quick  brown fox\njumps over\tthe lazy dog.\n\n' > "$tmp/a.txt"
printf '' > "$tmp/b.txt"
printf '   leading and trailing   \n\n\n  spaces\t\t here \n' > "$tmp/c.txt"
printf 'one' > "$tmp/d.txt"
run() {  # run FILE EXPECTED
  out="$(cd "$tmp" && python3 -I "$JUDGE_DIR/judge.py" confine python3 -I -B wordcount.py "$1" 2>&1)" || fail "wordcount.py $1 exited with an error: $out"
  [ "$(printf '%s' "$out" | tr -d '[:space:]')" = "$2" ] || fail "wordcount.py on test file $1 printed '$out', expected $2"
}
run a.txt 9
run b.txt 0
run c.txt 5
run d.txt 1
python3 -I -B - "$tmp" <<'PY' || exit 1
import os
import sys
sys.path.insert(0, os.environ["JUDGE_DIR"])
from judge import isolated_module
try:
    count_words = isolated_module(sys.argv[1] + "/wordcount.py").count_words
except Exception as e:
    print("FAIL: cannot import wordcount.py: %r" % (e,))
    sys.exit(1)
for text, exp in [("", 0), ("a b", 2), ("  a\n\nb\tc  ", 3), ("x" * 5, 1), ("\n\n", 0)]:
    got = count_words(text)
    if got != exp:
        print("FAIL: count_words(%r) returned %r, expected %r" % (text, got, exp))
        sys.exit(1)
PY
echo "OK"
